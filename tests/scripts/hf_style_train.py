"""A user's own HF-style training script (like run_glue.py), as nbtoolkit runs under `script:`.

It writes no metrics itself: nbtoolkit parses what the Trainer prints. Offline: a tiny BERT on
nbtoolkit's bundled sample data. Works with transformers 4 and 5.
"""

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch
from datasets import Dataset
from transformers import (
    AutoTokenizer,
    BertConfig,
    BertForSequenceClassification,
    Trainer,
    TrainerCallback,
    TrainingArguments,
)

import nbtoolkit

parser = argparse.ArgumentParser()
parser.add_argument("--max_steps", type=int, default=40)
parser.add_argument("--logging_steps", type=int, default=5)
parser.add_argument("--output_dir", default="output")
parser.add_argument("--disable_tqdm", action="store_true")
parser.add_argument("--step_seconds", type=float, default=0.0, help="hold each step to at least this long")
args = parser.parse_args()

assets = Path(nbtoolkit.__file__).parent / "assets"
tokenizer = AutoTokenizer.from_pretrained(assets / "tokenizers" / "wordpiece")
rows = [json.loads(line) for line in (assets / "data" / "text-classification" / "train.jsonl").open()][:400]
names = sorted({row["label"] for row in rows})
data = Dataset.from_dict({"text": [r["text"] for r in rows], "label": [names.index(r["label"]) for r in rows]})
data = data.map(lambda b: tokenizer(b["text"], truncation=True, max_length=64, padding="max_length"), batched=True)
split = data.train_test_split(test_size=0.2, seed=0)

torch.manual_seed(0)
model = BertForSequenceClassification(
    BertConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        num_labels=len(names),
    )
)
training = TrainingArguments(
    output_dir=args.output_dir,
    max_steps=args.max_steps,
    logging_steps=args.logging_steps,
    per_device_train_batch_size=16,
    learning_rate=3e-3,
    eval_strategy="steps",
    eval_steps=args.max_steps // 2,
    save_strategy="no",
    report_to="none",
    use_cpu=True,
    disable_tqdm=args.disable_tqdm,
    seed=0,
)


def accuracy(prediction):
    return {"accuracy": float(np.mean(np.argmax(prediction.predictions, -1) == prediction.label_ids))}


class Pace(TrainerCallback):
    """A steady pace on any machine, so a test can watch the run live (a fast machine finishes in a blink)."""

    def __init__(self, step_seconds: float) -> None:
        self.step_seconds, self.started = step_seconds, time.monotonic()

    def on_step_begin(self, args, state, control, **kwargs):
        self.started = time.monotonic()

    def on_step_end(self, args, state, control, **kwargs):
        time.sleep(max(0.0, self.step_seconds - (time.monotonic() - self.started)))


trainer = Trainer(
    model=model,
    args=training,
    train_dataset=split["train"],
    eval_dataset=split["test"],
    compute_metrics=accuracy,
    callbacks=[Pace(args.step_seconds)] if args.step_seconds else None,
)
trainer.train()
