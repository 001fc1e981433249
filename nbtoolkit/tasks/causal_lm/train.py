"""causal-lm (GPT-2 on wikitext style): texts packed into blocks of `dataset.max_length` tokens; perplexity.

As the HF `run_clm.py` example: empty lines dropped, every text tokenized, the token stream
concatenated and cut into equal blocks (the remainder of each group of 1000 rows is dropped),
labels = inputs (the model shifts them). Perplexity is exp(eval_loss), logged with every eval.
"""

from __future__ import annotations

import math
from itertools import chain

from transformers import AutoModelForCausalLM, Trainer, default_data_collator

from nbtoolkit.train.data import column, map_workers
from nbtoolkit.train.errors import TrainError
from nbtoolkit.train.models import ensure_pad_token, load_model, load_tokenizer
from nbtoolkit.train.task_setup import TaskSetup


class PerplexityTrainer(Trainer):
    """Adds eval_perplexity = exp(eval_loss) to every eval record, wherever it is logged to."""

    def log(self, logs: dict[str, float], *args, **kwargs) -> None:
        if "eval_loss" in logs:
            logs["eval_perplexity"] = math.exp(min(logs["eval_loss"], 700.0))  # no overflow on a diverged run
        super().log(logs, *args, **kwargs)


def block_size(spec, tokenizer, config) -> int:
    """dataset.max_length, but never more than the model's positions or the tokenizer's limit."""
    limits = [spec.dataset.max_length, tokenizer.model_max_length, getattr(config, "max_position_embeddings", None)]
    return min(limit for limit in limits if limit)


def setup(spec, splits) -> TaskSetup:
    train = splits["train"]
    text = column(spec, train, "text_column")
    tokenizer = load_tokenizer(spec.model_name)
    ensure_pad_token(tokenizer)
    model = load_model(AutoModelForCausalLM, spec, tokenizer)
    block = block_size(spec, tokenizer, model.config)

    def pack(batch):
        stream = list(chain.from_iterable(tokenizer(batch[text])["input_ids"]))
        blocks = [stream[start : start + block] for start in range(0, len(stream) - block + 1, block)]
        return {
            "input_ids": blocks,
            "attention_mask": [[1] * block for _ in blocks],
            "labels": [list(b) for b in blocks],
        }

    def prepare(dataset, split: str):
        workers = map_workers(spec, len(dataset))
        lines = dataset.filter(
            lambda batch: [bool(line and line.strip()) for line in batch[text]], batched=True, num_proc=workers
        )
        packed = lines.map(pack, batched=True, remove_columns=dataset.column_names, num_proc=workers)
        if len(packed) == 0:
            raise TrainError(
                f"the {split} split holds less than one block of {block} tokens; "
                "lower dataset.max_length or give more text"
            )
        return packed

    return TaskSetup(
        model=model,
        tokenizer=tokenizer,
        train_dataset=prepare(train, "train"),
        eval_dataset=prepare(splits["eval"], "eval") if "eval" in splits else None,
        data_collator=default_data_collator,
        trainer_class=PerplexityTrainer,
    )
