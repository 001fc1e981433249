"""The task registry: one entry per task, read by the spec, the training program, the pairing check,
the form and the rehearsal alike. Light: no model libraries.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

#: which models can do a task, as the pairing check reads a model's config
Head = Literal["sequence-classification", "question-answering", "seq2seq", "causal-lm"]


@dataclass(frozen=True)
class Task:
    name: str
    #: spec field -> the column it defaults to (the bundled sample's own; None: optional and unused)
    columns: dict[str, str | None]
    #: the model the task uses when the spec names none: built at run time from a bundled config
    bundled_model: str
    head: Head
    #: what the task needs of a model, in words, with models that have it
    needs: str
    #: the training program's module that sets the task up (model, datasets, collator, metrics)
    program: str


TASKS: dict[str, Task] = {
    task.name: task
    for task in (
        Task(
            "text-classification",
            {"text_column": "text", "text_pair_column": None, "label_column": "label"},
            "nbtoolkit/tiny-bert",
            "sequence-classification",
            "a model with a sequence-classification head (BERT, RoBERTa, DistilBERT, ...)",
            "nbtoolkit.train.tasks.classification",
        ),
        Task(
            "summarization",
            {"text_column": "article", "summary_column": "highlights"},
            "nbtoolkit/tiny-t5",
            "seq2seq",
            "an encoder-decoder (sequence-to-sequence) model such as t5, flan-t5 or bart",
            "nbtoolkit.train.tasks.summarization",
        ),
        Task(
            "question-answering",
            {"question_column": "question", "context_column": "context", "answer_column": "answers"},
            "nbtoolkit/tiny-bert",
            "question-answering",
            "a model with an extractive question-answering head (BERT, RoBERTa, DistilBERT, ...)",
            "nbtoolkit.train.tasks.question_answering",
        ),
        Task(
            "causal-lm",
            {"text_column": "text"},
            "nbtoolkit/tiny-gpt2",
            "causal-lm",
            "a decoder-only language model such as gpt2, llama or qwen2",
            "nbtoolkit.train.tasks.causal_lm",
        ),
        # trained by TRL's trainers; their data formats are nbtoolkit.chat_formats, not columns
        Task(
            "chat",
            {},
            "nbtoolkit/tiny-chat",
            "causal-lm",
            "a decoder-only (chat) model such as qwen2, llama or gpt2",
            "nbtoolkit.train.tasks.chat",
        ),
        Task(
            "preference",
            {},
            "nbtoolkit/tiny-chat",
            "causal-lm",
            "a decoder-only (chat) model such as qwen2, llama or gpt2",
            "nbtoolkit.train.tasks.preference",
        ),
        Task(
            "grpo",
            {},
            "nbtoolkit/tiny-chat",
            "causal-lm",
            "a decoder-only (chat) model such as qwen2, llama or gpt2",
            "nbtoolkit.train.tasks.grpo",
        ),
    )
}
#: the tasks TRL trains (the distribution's `chat` extra)
TRL_TASKS: tuple[str, ...] = ("chat", "preference", "grpo")
TASK_NAMES: tuple[str, ...] = tuple(TASKS)


def columns_used(task: str, dataset) -> dict[str, str]:
    """Spec field -> the column a spec's dataset block reads for the task (optional fields it leaves out)."""
    chosen = {field: getattr(dataset, field) or default for field, default in TASKS[task].columns.items()}
    return {field: name for field, name in chosen.items() if name}
