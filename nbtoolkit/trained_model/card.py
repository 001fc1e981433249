"""The model card (README.md) a pushed model carries: task, data, hyperparameters, metrics, time and cost.

Built from what the job already holds (its spec, metric records and record), so the card says what
ran, not what was meant to. Light: no model library.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from nbtoolkit.runner.listing import cost_usd, duration
from nbtoolkit.runner.store import JobRecord
from nbtoolkit.spec import RunSpec
from nbtoolkit.spec_parts.blocks import ShippedFunction
from nbtoolkit.tasks import TASKS

#: a Hub repository id (`gpt2`, `google/flan-t5-xl`); anything else a spec names is a local path
HUB_ID = re.compile(r"^[\w.-]+(/[\w.-]+)?\Z")


def hub_id(name: str) -> str | None:
    """`name` if it is a Hub id, None for a local path: a published card names no folder of this machine."""
    return name if HUB_ID.match(name) and not name.startswith(".") and not Path(name).exists() else None


def published(reference: str) -> str:
    """A model or function reference as a public card may show it: a hub id, a job or a module as written; of a
    local folder or file, only that it is local (a function keeps its file's name)."""
    if reference.startswith("job:"):
        return reference
    where, colon, function = reference.rpartition(":")
    if colon and not where.endswith(".py"):
        return reference  # module:function
    if colon:
        return f"{Path(where).name}:{function}"
    return hub_id(reference) or "a local model"


def _card_value(value: Any) -> str:
    if isinstance(value, list):
        return ", ".join(_card_value(item) for item in value)
    if isinstance(value, str):
        return published(value)
    if isinstance(value, ShippedFunction):  # its name, never its source
        return f"{value.name} (defined in a notebook)"
    return str(value)


def task_settings(spec: RunSpec) -> list[str]:
    """The lines of the task's own spec block (`reward:`, `preference:`): what scored or steered the training."""
    block = TASKS[spec.task].block
    settings = getattr(spec, block) if block else None
    if block is None or settings is None:
        return []
    values = {name: value for name, value in settings if value not in (None, [])}
    return [
        f"## {block.capitalize()}",
        "",
        *(f"- {name.replace('_', ' ')}: {_card_value(value)}" for name, value in values.items()),
        "",
    ]


def model_card(spec: RunSpec, record: JobRecord, records: list[dict[str, Any]]) -> str:
    adapter = spec.adapter
    data = spec.dataset
    source = data.name or (
        "local files (" + ", ".join(f"{split}: {Path(path).name}" for split, path in data.files.items()) + ")"
        if data.files
        else "the nbtoolkit bundled sample"
    )
    base_model = hub_id(spec.model_name)
    header = {
        "library_name": "peft" if adapter else "transformers",
        "pipeline_tag": TASKS[spec.task].pipeline_tag,
        "tags": ["nbtoolkit", *([adapter.type] if adapter else [])],
        **({"base_model": base_model} if spec.model and base_model else {}),
        **({"datasets": [data.name]} if data.name else {}),
    }
    train = spec.train
    hyperparameters = {
        "epochs": train.epochs,
        "max_steps": train.max_steps,
        "batch size per device": train.batch_size,
        "gradient accumulation": train.grad_accum,
        "learning rate": train.learning_rate,
        "warm-up": train.warmup,
        "weight decay": train.weight_decay,
        "seed": train.seed,
        "precision": spec.precision,
        "devices": spec.world_size,
        "strategy": spec.parallelism.strategy,
    }
    if adapter:
        hyperparameters.update(
            {
                f"{adapter.type} r": adapter.r,
                f"{adapter.type} alpha": adapter.alpha,
                f"{adapter.type} dropout": adapter.dropout,
                "target modules": ", ".join(adapter.target_modules or ["the family's default"]),
            }
        )
    evals = [entry for entry in records if entry.get("kind") == "eval"]
    metrics = {
        key: value
        for key, value in (evals[-1] if evals else {}).items()
        if key.startswith("eval_")
        and isinstance(value, (int, float))
        and not key.endswith(("runtime", "per_second", "preparation_time"))
    }
    cost = cost_usd(record)
    lines = [
        "---",
        yaml.safe_dump(header, sort_keys=False).strip(),
        "---",
        "",
        f"# {spec.display_name}",
        "",
        (
            f"{'A ' + adapter.type.replace('q', 'Q').replace('lora', 'LoRA') + ' adapter for' if adapter else 'A fine-tune of'} "
            f"{base_model or 'a local model'}, task {spec.task}, trained with nbtoolkit (job {record.id})."
        ),
        "",
        "## Data",
        "",
        f"- source: {source}",
        f"- train split: {data.train_split}, eval split: {data.eval_split}",
        f"- max length: {data.max_length}"
        + (f", max target length: {data.max_target_length}" if TASKS[spec.task].head == "seq2seq" else ""),
        "",
        "## Hyperparameters",
        "",
        *(f"- {key}: {value}" for key, value in hyperparameters.items() if value is not None),
        "",
        *task_settings(spec),
        "## Results",
        "",
        *(f"- {key}: {value:.4g}" for key, value in metrics.items()),
        *(["- no evaluation ran"] if not metrics else []),
        "",
        "## Training time and cost",
        "",
        f"- training time: {duration(record.elapsed) or 'unknown'} ({record.backend} launcher)",
        f"- cost: {f'${cost:.2f}' if cost is not None else 'not known (no hourly price)'}",
        "",
    ]
    return "\n".join(lines)
