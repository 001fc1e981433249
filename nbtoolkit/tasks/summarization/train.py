"""summarization (T5 / FLAN-T5 / BART): Seq2SeqTrainer, optional prompt template, ROUGE at eval.

Labels are padded with -100 so padding never counts in the loss. Generation at eval
(`predict_with_generate`) is on by default except on Neuron, which would recompile for every
new output length; without it eval reports the loss only. Under DeepSpeed ZeRO-3 the
Seq2SeqTrainer generates on every rank with `synced_gpus=True` by itself.
"""

from __future__ import annotations

import re

import numpy as np
from transformers import AutoModelForSeq2SeqLM, DataCollatorForSeq2Seq, Seq2SeqTrainer, Seq2SeqTrainingArguments

from nbtoolkit.train.data import column, map_workers
from nbtoolkit.train.errors import TrainError
from nbtoolkit.train.models import load_model, load_tokenizer
from nbtoolkit.train.task_setup import TaskSetup

ROUGE_TYPES = ("rouge1", "rouge2", "rougeL", "rougeLsum")
SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def config_class(spec) -> type:
    """The trainer arguments' class: the fields `extra` may set."""
    return Seq2SeqTrainingArguments


def prompted(tokenizer, texts: list[str], template: str | None, max_length: int) -> list[str]:
    """Each text inside the template, cut (at a token boundary) so the template's own words always fit."""
    if not template:
        return texts
    fixed = len(tokenizer(template.replace("{input}", ""))["input_ids"])
    budget = max(max_length - fixed, 1)
    pieces = tokenizer(texts, add_special_tokens=False, truncation=True, max_length=budget, return_offsets_mapping=True)
    return [
        template.replace("{input}", text[: offsets[-1][1]] if offsets else "")
        for text, offsets in zip(texts, pieces["offset_mapping"], strict=False)
    ]


def rouge(predictions: list[str], references: list[str]) -> dict[str, float]:
    """Mean ROUGE F-measures on 0-100, as the summarization tutorials and HF's run_summarization report them,
    stemmed; rougeLsum sees one sentence per line, as it expects."""
    from rouge_score import rouge_scorer

    scorer = rouge_scorer.RougeScorer(list(ROUGE_TYPES), use_stemmer=True)
    totals = dict.fromkeys(ROUGE_TYPES, 0.0)
    for prediction, reference in zip(predictions, references, strict=False):
        scores = scorer.score(
            "\n".join(SENTENCE_END.split(reference.strip())), "\n".join(SENTENCE_END.split(prediction.strip()))
        )
        for kind in ROUGE_TYPES:
            totals[kind] += scores[kind].fmeasure
    count = max(len(predictions), 1)
    return {kind: round(100 * total / count, 4) for kind, total in totals.items()}


def setup(spec, splits) -> TaskSetup:
    data = spec.dataset
    train = splits["train"]
    source = column(spec, train, "text_column")
    target = column(spec, train, "summary_column")
    if data.prompt_template and "{input}" not in data.prompt_template:
        raise TrainError(
            f"dataset.prompt_template {data.prompt_template!r} has no {{input}}; "
            "write where the text goes, e.g. 'Summarize the following news article:\\n{input}\\nSummary:\\n'"
        )
    tokenizer = load_tokenizer(spec.model_name)
    padding = "max_length" if data.pad_to_max_length else False

    def encode(batch):
        inputs = prompted(tokenizer, batch[source], data.prompt_template, data.max_length)
        encoded = tokenizer(inputs, max_length=data.max_length, truncation=True, padding=padding)
        labels = tokenizer(
            text_target=batch[target], max_length=data.max_target_length, truncation=True, padding=padding
        )["input_ids"]
        # fixed-length labels carry pad tokens: -100 keeps them out of the loss (the collator does this otherwise)
        encoded["labels"] = (
            [[token if token != tokenizer.pad_token_id else -100 for token in label] for label in labels]
            if padding
            else labels
        )
        return encoded

    def prepare(dataset):
        return dataset.map(
            encode, batched=True, remove_columns=dataset.column_names, num_proc=map_workers(spec, len(dataset))
        )

    model = load_model(AutoModelForSeq2SeqLM, spec, tokenizer)
    generate = spec.generates_in_evaluation

    def compute_metrics(prediction):
        predicted = np.where(prediction.predictions != -100, prediction.predictions, tokenizer.pad_token_id)
        labels = np.where(prediction.label_ids != -100, prediction.label_ids, tokenizer.pad_token_id)
        texts = tokenizer.batch_decode(predicted, skip_special_tokens=True)
        scores = rouge(texts, tokenizer.batch_decode(labels, skip_special_tokens=True))
        scores["gen_len"] = float(np.mean(np.count_nonzero(predicted != tokenizer.pad_token_id, axis=-1)))
        return scores

    return TaskSetup(
        model=model,
        tokenizer=tokenizer,
        train_dataset=prepare(train),
        eval_dataset=prepare(splits["eval"]) if "eval" in splits else None,
        data_collator=DataCollatorForSeq2Seq(tokenizer, model=model, label_pad_token_id=-100),
        compute_metrics=compute_metrics if generate else None,
        trainer_class=Seq2SeqTrainer,
        arguments_class=config_class(spec),
        argument_overrides=dict(
            predict_with_generate=generate, generation_max_length=data.max_target_length, generation_num_beams=1
        ),
    )
