"""A user's Trainer script that takes a Hub token as an argument, as many do (tests of secrets).

One step of a tiny BERT under whatever launcher runs it, the model saved (with the Trainer's pickled
training_args.bin) in the job's output folder. It echoes its arguments as scripts that log their
configuration do, and hands the token to the Hub client through HF_TOKEN, never TrainingArguments.
"""

import argparse
import os
import sys

parser = argparse.ArgumentParser()
parser.add_argument("--hf_token", required=True)
parser.add_argument("--deepspeed", default=None)
parser.add_argument("--use_cpu", action="store_true")
parser.add_argument("--local_rank", type=int, default=-1)  # the DeepSpeed launcher passes it
args = parser.parse_args()
print(f"arguments: {sys.argv[1:]}", flush=True)
os.environ["HF_TOKEN"] = args.hf_token

import torch  # noqa: E402  (after the arguments: a bad call fails fast)
from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments  # noqa: E402  (as torch above)

config = BertConfig(
    vocab_size=64, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32, num_labels=2
)
rows = [
    {"input_ids": torch.arange(1, 9), "attention_mask": torch.ones(8, dtype=torch.long), "labels": torch.tensor(i % 2)}
    for i in range(8)
]
training = TrainingArguments(
    output_dir=os.path.join(os.environ["NBTOOLKIT_JOB_DIR"], "output"),
    max_steps=1,
    per_device_train_batch_size=2,
    logging_steps=1,
    use_cpu=args.use_cpu,
    deepspeed=args.deepspeed,
    report_to="none",
    save_strategy="no",
    disable_tqdm=True,
)
trainer = Trainer(model=BertForSequenceClassification(config), args=training, train_dataset=rows)
trainer.train()
trainer.save_model()
