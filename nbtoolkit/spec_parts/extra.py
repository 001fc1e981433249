"""`extra`: the trainer's own arguments a spec passes through, and the ones it may not hold.

The training program sets many trainer arguments from the spec's fields and then lets `extra` have the last
word, so `extra: {learning_rate: 1e-3}` silently beat `train.learning_rate` (and the plan, which reads the
field). A key the spec sets by a field is refused here, naming that field; so is a NaN or an infinity. Keys the
trainer does not have at all are checked in the preflight (nbtoolkit.inputs.preflight), where the task's config class
can be imported: the spec stays light.
"""

from __future__ import annotations

import math
from typing import Any

from nbtoolkit.tasks import TASKS

#: trainer arguments the program sets from a spec field, for every task (nbtoolkit.train.program)
SET_BY_FIELD: dict[str, str] = {
    "num_train_epochs": "train.epochs",
    "max_steps": "train.max_steps",
    "per_device_train_batch_size": "train.batch_size",
    "per_device_eval_batch_size": "train.eval_batch_size",
    "gradient_accumulation_steps": "train.grad_accum",
    "learning_rate": "train.learning_rate",
    "warmup_steps": "train.warmup",
    "weight_decay": "train.weight_decay",
    "max_grad_norm": "train.max_grad_norm",
    "seed": "train.seed",
    "data_seed": "train.seed",
    "logging_steps": "train.logging_steps",
    "eval_steps": "train.eval_steps",
    "eval_on_start": "train.eval_on_start",
    "save_steps": "train.save_steps",
    "save_total_limit": "train.save_total_limit",
    "gradient_checkpointing": "train.gradient_checkpointing",
    "activation_checkpointing": "train.gradient_checkpointing",  # its name from transformers 5.2x
    "bf16": "precision",
    "fp16": "precision",
    "use_cpu": "hardware.accelerator",
    "torch_compile": "compile",
    "report_to": "report_to",
    "run_name": "name",
}

#: trainer arguments the program sets for a reason of its own, whatever the spec says
SET_BY_NBTOOLKIT: dict[str, str] = {
    "logging_nan_inf_filter": "it stays off so that a NaN loss is logged as NaN and the run doctor sees it",
    "local_rank": "the launcher gives each process its rank",
}


def set_by_field(task: str) -> dict[str, str]:
    """Trainer argument -> the spec field that sets it, for a task."""
    return SET_BY_FIELD | TASKS[task].set_by_field  # the task's own: what its setup's argument_overrides read


def extra_problem(task: str, extra: dict[str, Any]) -> str | None:
    """The first key of `extra` the spec must not hold, as one sentence (None: all may reach the trainer)."""
    fields = set_by_field(task)
    for key, value in extra.items():
        if key in fields:
            return (
                f"extra.{key} would override {fields[key]}, which sets it; set {fields[key]} instead and remove "
                f"extra.{key}"
            )
        if key in SET_BY_NBTOOLKIT:
            return f"extra.{key} is set by nbtoolkit ({SET_BY_NBTOOLKIT[key]}); remove extra.{key}"
        if not finite(value):
            return f"extra.{key}: {value!r} holds a number that is not finite (NaN or infinity); give a finite number"
    return None


def finite(value: Any) -> bool:
    """No NaN or infinity in a value, nor in the lists and mappings it holds; nor a text that reads as one (YAML
    reads `1e999` and `inf` as text, and the program turns a number's text into the number for the trainer)."""
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            return True
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(finite(item) for item in value.values())
    if isinstance(value, (list, tuple)):
        return all(finite(item) for item in value)
    return True
