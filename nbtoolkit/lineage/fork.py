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

from nbtoolkit.backends import LaunchError
from nbtoolkit.lineage.checkpoints import CHECKPOINT_DIR, checkpoint_step, is_complete, last_checkpoint
from nbtoolkit.ranks.heartbeat import KEPT_DIR, keep_checkpoint
from nbtoolkit.spec import RunSpec, SpecError, load_spec
from nbtoolkit.spec_parts.blocks import TrainSpec
from nbtoolkit.spec_parts.yaml_reading import merged, parse_settings

FORK_CHECKPOINT, FORK_CHANGES = "fork_checkpoint", "fork_changes"
#: changes that take no more memory than the parent's run: a fork with only these is not checked again
KEEPS_FIT = frozenset({"train.learning_rate", "train.max_steps", "train.budget_usd", "name"})
#: what a fork cannot change: the checkpoint's weights and optimizer state are of this task, model and adapter
FIXED = ("task", "model", "adapter", "script", "resume")
FORKABLE = ("train.learning_rate", "train.batch_size", "train.max_steps", "train.budget_usd")


def field_path(name: str) -> str:
    """`learning_rate` -> `train.learning_rate` (a train field's bare name); a dotted path stays."""
    return f"train.{name}" if "." not in name and name in TrainSpec.model_fields else name


def fork_settings(items: list[str]) -> dict[str, Any]:
    """`--set` items of a fork (CLI, REST, the fork button) as {dotted field: value}; a bare name that is neither a
    train field nor a spec field (`name`) is refused here, in one sentence, before it could be taken for an
    argument of `Job.fork` (`force`)."""
    changes = {field_path(name): value for name, value in parse_settings(items).items()}
    for path in changes:
        if "." not in path and path not in RunSpec.model_fields:
            raise SpecError(
                f"--set {path}: no train or spec field is called {path}; a fork may change {', '.join(FORKABLE)}, "
                "name and the like (a bare train field name, a spec field's name or a dotted path)"
            )
    return changes


def nested(path: str, value: Any) -> dict[str, Any]:
    """`train.learning_rate`, 1e-4 -> {"train": {"learning_rate": 1e-4}} (for spec.merged)."""
    for block in reversed(path.split(".")):
        value = {block: value}
    return value


def fork_checkpoint(job_id: str, output: Path, checkpoint: str | Path | None) -> Path:
    """The checkpoint to fork from: the job's last complete one in its `output` folder, its step (`40`,
    `checkpoint-40`) or a path."""
    if checkpoint is None:
        found = [path for path in (last_checkpoint(output), last_checkpoint(output / KEPT_DIR)) if path]
        if not found:
            raise LaunchError(
                f"job {job_id} has saved no complete checkpoint to fork from; `nbtoolkit checkpoint {job_id}` asks a "
                "running job for one"
            )
        return max(found, key=lambda path: checkpoint_step(path) or 0)
    text = str(checkpoint)
    name = f"checkpoint-{text}" if text.isdigit() else text if CHECKPOINT_DIR.match(text) else None
    if name is None:
        path = Path(text).expanduser().resolve()
    else:  # one saved on request is in kept/ (see nbtoolkit.ranks.heartbeat)
        path = output / KEPT_DIR / name if (output / KEPT_DIR / name).is_dir() else output / name
    if not is_complete(path):
        raise LaunchError(f"--from {text}: {path} is not a complete checkpoint of job {job_id}")
    return path


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
    changes = {field_path(name): value for name, value in changes.items()}
    for path in changes:
        if path.split(".")[0] in FIXED:
            raise SpecError(
                f"--set {path}: a fork trains on the parent's checkpoint, so it keeps its {path.split('.')[0]}; "
                f"a fork may change {', '.join(FORKABLE)} and the like; start a new run for another {path}"
            )
    start = fork_checkpoint(job_id, output, checkpoint)
    data = spec.model_dump(mode="json")
    for path, value in changes.items():
        data = merged(data, nested(path, value))
    data["resume"] = str(start)
    if "name" not in changes:
        data["name"] = f"{spec.display_name}-fork"
    forked = load_spec(data)
    refuse_training_nothing(forked.train.max_steps, start, "the fork", "--set max_steps={}")
    if start.parent == output:
        start = keep(job_id, start)
        forked = forked.model_copy(update={"resume": str(start)})
    as_checked = forked.model_dump(mode="json")  # the values as the spec reads them: 5e-4 is a number
    return forked, start, {path: value_at(as_checked, path, value) for path, value in changes.items()}


def refuse_training_nothing(max_steps: int | None, checkpoint: Path, run: str, larger: str) -> None:
    """A run from `checkpoint` to a train.max_steps not above its step is refused: it would train nothing (the
    Trainer takes one step past the end at learning rate 0, `step 22/21 (104%)`). `larger` shows how to ask for
    more steps, `{}` the number."""
    step = checkpoint_step(checkpoint)
    if step is not None and max_steps is not None and max_steps <= step:
        raise SpecError(
            f"train.max_steps {max_steps} is not above the checkpoint's step {step}: {run} would train nothing; "
            f"give a larger one, e.g. {larger.format(step + 100)}"
        )


def value_at(data: dict[str, Any], path: str, default: Any) -> Any:
    for block in path.split("."):
        if not isinstance(data, dict) or block not in data:
            return default
        data = data[block]
    return data
