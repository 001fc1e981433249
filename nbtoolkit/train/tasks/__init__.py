"""One module per task: turn a spec and its data into a model, datasets, collator and metrics."""

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


def check_task(spec) -> None:
    """Fail in one sentence, before any data or weights load, if the model cannot do the task."""
    from nbtoolkit.train.models import model_config
    from nbtoolkit.train.pairing import check_pairing

    config = model_config(spec.model_name)
    check_pairing(spec, config)
    if spec.adapter is not None:
        from nbtoolkit.train.adapters import check_adapter

        check_adapter(spec, config)


def setup_task(spec, splits) -> TaskSetup:
    return importlib.import_module(TASKS[spec.task].program).setup(spec, splits)
