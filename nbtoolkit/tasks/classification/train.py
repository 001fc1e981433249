"""text-classification: label names <-> ids from the data, accuracy and macro-F1."""

from __future__ import annotations

import numpy as np
from transformers import AutoModelForSequenceClassification, DataCollatorWithPadding

from nbtoolkit.train.data import column, map_workers
from nbtoolkit.train.models import ensure_pad_token, load_model, load_tokenizer
from nbtoolkit.train.task_setup import TaskSetup


def label_names(dataset, label_column: str) -> list[str]:
    """Class names: the ClassLabel names if the data has them, else the sorted distinct values."""
    feature = dataset.features[label_column]
    if hasattr(feature, "names"):
        return list(feature.names)
    return [str(value) for value in sorted(set(dataset[label_column]))]


def accuracy_and_macro_f1(predictions: np.ndarray, labels: np.ndarray, num_labels: int) -> dict[str, float]:
    scores = []
    for label in range(num_labels):
        true_pos = np.sum((predictions == label) & (labels == label))
        predicted, actual = np.sum(predictions == label), np.sum(labels == label)
        if actual == 0 and predicted == 0:
            continue
        scores.append(2 * true_pos / (predicted + actual))
    return {"accuracy": float(np.mean(predictions == labels)), "f1": float(np.mean(scores)) if scores else 0.0}


def setup(spec, splits) -> TaskSetup:
    train = splits["train"]
    text = column(spec, train, "text_column")
    pair = column(spec, train, "text_pair_column") if spec.dataset.text_pair_column else None
    label = column(spec, train, "label_column")
    names = label_names(train, label)
    label2id = {name: index for index, name in enumerate(names)}
    is_class_label = hasattr(train.features[label], "names")

    tokenizer = load_tokenizer(spec.model_name)
    ensure_pad_token(tokenizer)
    padding = "max_length" if spec.dataset.pad_to_max_length else False

    def encode(batch):
        encoded = tokenizer(
            batch[text],
            batch[pair] if pair else None,
            truncation=True,
            max_length=spec.dataset.max_length,
            padding=padding,
        )
        values = batch[label]
        encoded["labels"] = values if is_class_label else [label2id[str(value)] for value in values]
        return encoded

    def prepare(dataset):
        unknown = set() if is_class_label else {str(value) for value in dataset[label]} - label2id.keys()
        if unknown:
            from nbtoolkit.train.errors import TrainError

            raise TrainError(f"the eval split has labels the train split lacks: {', '.join(sorted(unknown))}")
        return dataset.map(
            encode, batched=True, remove_columns=dataset.column_names, num_proc=map_workers(spec, len(dataset))
        )

    model = load_model(
        AutoModelForSequenceClassification,
        spec,
        tokenizer,
        num_labels=len(names),
        id2label=dict(enumerate(names)),
        label2id=label2id,
    )
    model.config.pad_token_id = tokenizer.pad_token_id  # decoder-only models find the last real token by it

    def compute_metrics(prediction):
        logits = prediction.predictions[0] if isinstance(prediction.predictions, tuple) else prediction.predictions
        return accuracy_and_macro_f1(np.argmax(logits, axis=-1), prediction.label_ids, len(names))

    return TaskSetup(
        model=model,
        tokenizer=tokenizer,
        train_dataset=prepare(train),
        eval_dataset=prepare(splits["eval"]) if "eval" in splits else None,
        data_collator=DataCollatorWithPadding(tokenizer),
        compute_metrics=compute_metrics,
    )
