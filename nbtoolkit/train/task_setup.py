"""What every task's training setup shares: the TaskSetup its `train` module returns (nbtoolkit/tasks/<task>/train.py),
and the training program's calls into that module."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from nbtoolkit.tasks import TASKS


@dataclass
class TaskSetup:
    """Everything the Trainer needs for one task."""

    model: Any
    tokenizer: Any
    train_dataset: Any
    eval_dataset: Any | None
    data_collator: Any
    compute_metrics: Callable | None = None
    trainer_class: type | None = None  # default transformers.Trainer
    arguments_class: type | None = None  # default transformers.TrainingArguments
    argument_overrides: dict[str, Any] = field(default_factory=dict)
    trainer_arguments: dict[str, Any] = field(default_factory=dict)  # more for the trainer, e.g. TRL's reward_funcs
    #: the modules an adapter wraps when adapter.target_modules names none (a vision-language model's language model
    #: alone); None: every linear layer (PEFT's all-linear)
    adapter_targets: list[str] | None = None


def trl_overrides(spec) -> dict:
    """What every TRL task's config needs from the spec beyond TrainingArguments' fields.

    TRL's configs turn activation checkpointing on by default (and bf16, which the program sets already);
    unset here, the spec decides as it does for every task (its default for the TRL tasks is on, as TRL's).
    """
    return dict(gradient_checkpointing=None)


def trainer_arguments(task: TaskSetup) -> dict[str, Any]:
    """What the task's trainer takes beside model, args and data: a collator and metrics only where the task has
    them (TRL's GRPO trainer takes neither), and the task's own (TRL's reward_funcs, a reference model)."""
    given = {"data_collator": task.data_collator, "compute_metrics": task.compute_metrics}
    return {**{key: value for key, value in given.items() if value is not None}, **task.trainer_arguments}


def check_task(spec) -> None:
    """Fail in one sentence, before any data or weights load, if the model cannot do the task."""
    from nbtoolkit.train.models import model_config
    from nbtoolkit.train.pairing import check_pairing

    config = model_config(spec.model_name)
    check_pairing(spec, config)
    if spec.adapter is not None:
        from nbtoolkit.train.adapters import check_adapter

        check_adapter(spec, config)


def arguments_class(spec) -> type:
    """The class of the task's trainer arguments (its module's `config_class`: TRL's configs, Seq2Seq's), else
    TrainingArguments: the fields `extra` may set. An engine's own (optimum-neuron's) is not asked here."""
    own = getattr(importlib.import_module(TASKS[spec.task].program), "config_class", None)
    if own is not None:
        return own(spec)
    from transformers import TrainingArguments

    return TrainingArguments


def setup_task(spec, splits) -> TaskSetup:
    return importlib.import_module(TASKS[spec.task].program).setup(spec, splits)
