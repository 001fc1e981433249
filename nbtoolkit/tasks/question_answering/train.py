"""question-answering (extractive, SQuAD style): long contexts in overlapping windows, answer spans, EM/F1.

A context longer than `dataset.max_length` becomes several features that overlap by
`dataset.doc_stride` tokens; each feature's start/end positions point at the answer's tokens
(or at the first token when the answer is not inside that window). At eval the best span over
all of an example's features becomes its answer text, scored by exact match and F1 (0-1)
after SQuAD's normalisation.
"""

from __future__ import annotations

import collections
import re
import string

import numpy as np
from transformers import AutoModelForQuestionAnswering, DataCollatorWithPadding

from nbtoolkit.train.data import column, map_workers
from nbtoolkit.train.errors import TrainError
from nbtoolkit.train.models import load_model, load_tokenizer
from nbtoolkit.train.task_setup import TaskSetup

N_BEST = 20  # candidate starts and ends per feature
MAX_ANSWER_TOKENS = 30


def normalize_answer(text: str) -> str:
    """SQuAD's normalisation: lower case, no punctuation, no articles, single spaces."""
    text = "".join(char for char in text.lower() if char not in set(string.punctuation))
    return " ".join(re.sub(r"\b(a|an|the)\b", " ", text).split())


def exact_match_and_f1(prediction: str, truths: list[str]) -> tuple[float, float]:
    """Best exact match and token F1 of one prediction against the accepted answers."""
    predicted = normalize_answer(prediction).split()
    best_em = best_f1 = 0.0
    for truth in truths:
        expected = normalize_answer(truth).split()
        best_em = max(best_em, float(predicted == expected))
        common = sum((collections.Counter(predicted) & collections.Counter(expected)).values())
        if common:
            precision, recall = common / len(predicted), common / len(expected)
            best_f1 = max(best_f1, 2 * precision * recall / (precision + recall))
        elif not predicted and not expected:
            best_f1 = max(best_f1, 1.0)
    return best_em, best_f1


def best_answer(context: str, features: list[tuple[np.ndarray, np.ndarray, list]]) -> str:
    """The highest-scoring valid span over an example's features: (start logits, end logits, offsets)."""
    return best_span(context, features)[0]


def best_span(context: str, features: list[tuple[np.ndarray, np.ndarray, list]]) -> tuple[str, float]:
    """The best answer and its score: P(start) x P(end) under its feature's softmax (the HF pipeline's score)."""
    best_logit, best_text, best_score = -np.inf, "", 0.0
    for start_logits, end_logits, offsets in features:
        starts = np.argsort(start_logits)[::-1][:N_BEST]
        ends = np.argsort(end_logits)[::-1][:N_BEST]
        for start in starts:
            for end in ends:
                if start >= len(offsets) or end >= len(offsets) or offsets[start] is None or offsets[end] is None:
                    continue
                if end < start or end - start + 1 > MAX_ANSWER_TOKENS:
                    continue
                logit = start_logits[start] + end_logits[end]
                if logit > best_logit:
                    best_logit, best_text = logit, context[offsets[start][0] : offsets[end][1]]
                    best_score = float(_softmax(start_logits)[start] * _softmax(end_logits)[end])
    return best_text, best_score


def _softmax(logits: np.ndarray) -> np.ndarray:
    shifted = np.exp(logits - logits.max())
    return shifted / shifted.sum()


def setup(spec, splits) -> TaskSetup:
    data = spec.dataset
    train = splits["train"]
    question = column(spec, train, "question_column")
    context = column(spec, train, "context_column")
    answers = column(spec, train, "answer_column")
    if data.doc_stride >= data.max_length // 2:
        raise TrainError(
            f"dataset.doc_stride {data.doc_stride} is too large for dataset.max_length "
            f"{data.max_length}; use less than {data.max_length // 2}"
        )
    tokenizer = load_tokenizer(spec.model_name)
    question_first = tokenizer.padding_side == "right"
    context_sequence = 1 if question_first else 0
    padding = "max_length" if data.pad_to_max_length else False

    def answer_span(answer) -> tuple[int, int] | None:
        """(start, end) characters of the first answer; None when the question has none (SQuAD v2)."""
        try:
            if not answer["text"]:
                return None
            start = int(answer["answer_start"][0])
            return start, start + len(answer["text"][0])
        except (KeyError, IndexError, TypeError, ValueError):
            raise TrainError(
                f"dataset.answer_column '{answers}' must hold SQuAD-style answers "
                f"{{'text': [...], 'answer_start': [...]}}; found {answer!r}"
            ) from None

    def features(batch, indices):
        first, second = (batch[question], batch[context]) if question_first else (batch[context], batch[question])
        encoded = tokenizer(
            [text.lstrip() for text in first] if question_first else first,
            second if question_first else [text.lstrip() for text in second],
            truncation="only_second" if question_first else "only_first",
            max_length=data.max_length,
            stride=data.doc_stride,
            return_overflowing_tokens=True,
            return_offsets_mapping=True,
            padding=padding,
        )
        example_of = encoded.pop("overflow_to_sample_mapping")
        encoded["start_positions"], encoded["end_positions"], encoded["example_id"] = [], [], []
        for index, offsets in enumerate(encoded["offset_mapping"]):
            sequence = encoded.sequence_ids(index)
            in_context = [k for k, part in enumerate(sequence) if part == context_sequence]
            first_token, last_token = in_context[0], in_context[-1]
            span = answer_span(batch[answers][example_of[index]])
            fallback = (
                encoded["input_ids"][index].index(tokenizer.cls_token_id)
                if tokenizer.cls_token_id in encoded["input_ids"][index]
                else 0
            )
            start = end = fallback
            if span and offsets[first_token][0] <= span[0] and offsets[last_token][1] >= span[1]:
                start = next(k for k in in_context if offsets[k][1] > span[0])
                end = next(k for k in reversed(in_context) if offsets[k][0] < span[1])
            encoded["start_positions"].append(start)
            encoded["end_positions"].append(end)
            encoded["example_id"].append(indices[example_of[index]])
            # only context tokens can be part of an answer: the others lose their offsets
            encoded["offset_mapping"][index] = [
                offset if sequence[k] == context_sequence else None for k, offset in enumerate(offsets)
            ]
        return encoded

    def prepare(dataset, keep_for_eval: bool):
        prepared = dataset.map(
            features,
            batched=True,
            with_indices=True,
            remove_columns=dataset.column_names,
            num_proc=map_workers(spec, len(dataset)),
        )
        return prepared if keep_for_eval else prepared.remove_columns(["offset_mapping", "example_id"])

    eval_examples = splits.get("eval")
    eval_features = prepare(eval_examples, keep_for_eval=True) if eval_examples is not None else None

    def compute_metrics(prediction):
        start_logits, end_logits = prediction.predictions[:2]
        by_example = collections.defaultdict(list)
        for index, (example, offsets) in enumerate(
            zip(eval_features["example_id"], eval_features["offset_mapping"], strict=False)
        ):
            by_example[example].append((start_logits[index], end_logits[index], offsets))
        scores = np.array(
            [
                exact_match_and_f1(best_answer(example[context], by_example[index]), list(example[answers]["text"]))
                for index, example in enumerate(eval_examples)
            ]
        )
        return {"exact_match": float(scores[:, 0].mean()), "f1": float(scores[:, 1].mean())}

    return TaskSetup(
        model=load_model(AutoModelForQuestionAnswering, spec, tokenizer),
        tokenizer=tokenizer,
        train_dataset=prepare(train, keep_for_eval=False),
        eval_dataset=eval_features,
        data_collator=DataCollatorWithPadding(tokenizer),
        compute_metrics=compute_metrics,
    )
