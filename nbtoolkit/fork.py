"""Fork a run: a new job from one of a job's checkpoints with changed settings (learning rate, batch,
budget), while the parent runs on or after it ended. Unlike a resume (one per job, the same spec) a
job may be forked any number of times; each fork records its lineage in its row's info (`forked_from`,
`fork_checkpoint`, `fork_changes`) and its chart continues the parent's steps (metrics.chain).

The training program carries the checkpoint's optimizer and scheduler on, at the fork's learning rate
(train.callbacks.LearningRateCallback). A user's script takes its settings from its own arguments:
it is resumed, not forked.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from nbtoolkit.backends import LaunchError
from nbtoolkit.checkpoints import CHECKPOINT_DIR, checkpoint_step, is_complete, last_checkpoint
from nbtoolkit.heartbeat import KEPT_DIR, keep_checkpoint
from nbtoolkit.spec import RunSpec, SpecError, TrainSpec, load_spec, merged

FORK_CHECKPOINT, FORK_CHANGES = "fork_checkpoint", "fork_changes"


def field_path(name: str) -> str:
    """`learning_rate` -> `train.learning_rate` (a train field's bare name); a dotted path stays."""
    return f"train.{name}" if "." not in name and name in TrainSpec.model_fields else name


def parse_settings(items: list[str]) -> dict[str, Any]:
    """`["train.learning_rate=1e-4", "max_steps=200"]` -> changes (values read as YAML: numbers, booleans)."""
    changes = {}
    for item in items:
        field, sep, value = item.partition("=")
        if not sep or not field.strip():
            raise SpecError(f"--set {item[:60]!r} is not FIELD=VALUE; e.g. --set train.learning_rate=1e-4")
        changes[field.strip()] = yaml.safe_load(value)
    return changes


def nested(path: str, value: Any) -> dict[str, Any]:
    """`train.learning_rate`, 1e-4 -> {"train": {"learning_rate": 1e-4}} (for spec.merged)."""
    for block in reversed(path.split(".")):
        value = {block: value}
    return value


def fork_checkpoint(job_id: str, output: Path, checkpoint: str | Path | None) -> Path:
    """The checkpoint to fork from: the job's last complete one in its `output` folder, its step (`40`,
    `checkpoint-40`) or a path; one of the job's own is kept out of its rotation first (`keep`)."""
    if checkpoint is None:
        found = [path for path in (last_checkpoint(output), last_checkpoint(output / KEPT_DIR)) if path]
        if not found:
            raise LaunchError(
                f"job {job_id} has saved no complete checkpoint to fork from; `nbtoolkit checkpoint {job_id}` asks a "
                "running job for one"
            )
        return keep(job_id, max(found, key=lambda path: checkpoint_step(path) or 0))
    text = str(checkpoint)
    name = f"checkpoint-{text}" if text.isdigit() else text if CHECKPOINT_DIR.match(text) else None
    if name is None:
        path = Path(text).expanduser().resolve()
    else:  # one saved on request is in kept/ (see nbtoolkit.heartbeat)
        path = output / KEPT_DIR / name if (output / KEPT_DIR / name).is_dir() else output / name
    if not is_complete(path):
        raise LaunchError(f"--from {text}: {path} is not a complete checkpoint of job {job_id}")
    return keep(job_id, path) if path.parent == output else path


def keep(job_id: str, checkpoint: Path) -> Path:
    """The checkpoint kept out of the job's rotation before the fork launches: the parent may run on and
    delete it (save_total_limit) before the fork has loaded it."""
    try:
        kept = keep_checkpoint(checkpoint)
    except OSError as exc:
        raise LaunchError(
            f"{checkpoint.name} of job {job_id} could not be kept for the fork ({exc.strerror or exc}); "
            "the running job's rotation may have deleted it: fork from a later checkpoint"
        ) from None
    if not is_complete(kept):
        raise LaunchError(f"{kept} is not a complete checkpoint of job {job_id}; fork from a later checkpoint")
    return kept


def fork_spec(
    job_id: str, spec: RunSpec, output: Path, checkpoint: str | Path | None, changes: dict[str, Any]
) -> tuple[RunSpec, Path, dict[str, Any]]:
    """The fork's spec (resuming from the checkpoint, with the changes), the checkpoint, and the changes by field
    path; `Job.fork` launches it and records the lineage."""
    if spec.script is not None:
        raise LaunchError(
            f"job {job_id} ran the script {spec.script.path}, whose settings are its own arguments: it can be "
            f"resumed (`nbtoolkit resume {job_id}`), not forked with new settings"
        )
    start = fork_checkpoint(job_id, output, checkpoint)
    changes = {field_path(name): value for name, value in changes.items()}
    data = spec.model_dump(mode="json")
    for path, value in changes.items():
        data = merged(data, nested(path, value))
    data["resume"] = str(start)
    if "name" not in changes:
        data["name"] = f"{spec.display_name}-fork"
    return load_spec(data), start, changes
