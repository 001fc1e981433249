"""A user's own causal-LM script in the style of transformers' examples/pytorch/language-modeling/run_clm.py.

HfArgumentParser over model/data/training dataclasses, a text file given relative to where it is launched
(`--train_file data/train.txt`, as the examples' READMEs write it), grouping into blocks, Trainer, an
evaluation after training and a save at the end. It knows nothing of nbtoolkit. Offline: a tiny GPT-2 built
from scratch with nbtoolkit's bundled byte-level BPE tokenizer. It writes the Trainer's own log_history to
`--history_file` so a test can compare nbtoolkit's records with it.
"""

import json
import sys
from dataclasses import dataclass, field
from itertools import chain

import torch
from datasets import load_dataset
from transformers import (
    AutoTokenizer,
    DataCollatorForLanguageModeling,
    GPT2Config,
    GPT2LMHeadModel,
    HfArgumentParser,
    Trainer,
    TrainingArguments,
)


@dataclass
class ModelArguments:
    tokenizer_name: str = field(metadata={"help": "a local tokenizer folder"})
    n_embd: int = 32
    n_layer: int = 1


@dataclass
class DataTrainingArguments:
    train_file: str = field(metadata={"help": "a text file, one passage per line"})
    validation_split_percentage: int = 10
    block_size: int = 32
    history_file: str | None = None


def main():
    parser = HfArgumentParser((ModelArguments, DataTrainingArguments, TrainingArguments))
    model_args, data_args, training_args = parser.parse_args_into_dataclasses()
    raw = load_dataset("text", data_files={"train": data_args.train_file})["train"]
    raw = raw.filter(lambda row: row["text"].strip() != "")
    split = raw.train_test_split(test_size=data_args.validation_split_percentage / 100, seed=0)
    tokenizer = AutoTokenizer.from_pretrained(model_args.tokenizer_name)
    tokenizer.pad_token = tokenizer.pad_token or tokenizer.eos_token

    def tokenize(batch):
        return tokenizer(batch["text"])

    def group_texts(examples):
        concatenated = {key: list(chain(*examples[key])) for key in examples}
        total = len(concatenated["input_ids"]) // data_args.block_size * data_args.block_size
        return {
            key: [values[i : i + data_args.block_size] for i in range(0, total, data_args.block_size)]
            for key, values in concatenated.items()
        }

    with training_args.main_process_first(desc="grouping texts"):
        lm = split.map(tokenize, batched=True, remove_columns=["text"]).map(group_texts, batched=True)

    torch.manual_seed(training_args.seed)
    config = GPT2Config(
        vocab_size=len(tokenizer),
        n_positions=data_args.block_size,
        n_embd=model_args.n_embd,
        n_layer=model_args.n_layer,
        n_head=2,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    trainer = Trainer(
        model=GPT2LMHeadModel(config),
        args=training_args,
        train_dataset=lm["train"],
        eval_dataset=lm["test"],
        processing_class=tokenizer,
        data_collator=DataCollatorForLanguageModeling(tokenizer, mlm=False),
    )
    if training_args.do_train:
        result = trainer.train()
        trainer.save_model()
        trainer.log_metrics("train", result.metrics)
    if training_args.do_eval:
        metrics = trainer.evaluate()
        trainer.log_metrics("eval", metrics)
    if data_args.history_file and trainer.is_world_process_zero():
        with open(data_args.history_file, "w") as handle:
            json.dump(trainer.state.log_history, handle)
    print(
        f"distributed: world size {training_args.world_size}, deepspeed: {trainer.is_deepspeed_enabled}",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
