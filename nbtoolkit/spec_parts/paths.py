"""A spec's local paths made absolute against the caller's working directory.

A job runs in its own folder, so `files: {train: data/train.jsonl}` written next to a notebook
must name the notebook's `data/`, not the job folder's: paths are fixed before the job exists.
"""

from __future__ import annotations

from pathlib import Path

from nbtoolkit.rewards import ship_file
from nbtoolkit.spec import RunSpec
from nbtoolkit.spec_parts.blocks import ShippedFunction


def absolute(path: str, cwd: Path) -> str:
    """`path` from `cwd` (with `~` expanded); URLs (`s3://`, `https://`) stay as they are."""
    if "://" in path:
        return path
    return str(cwd / Path(path).expanduser())


def local_model(model: str | None, cwd: Path) -> str | None:
    """A model that is a folder here (or written as one: `./`, `../`, `~`) made absolute; a hub id stays."""
    if model is None or not (model.startswith((".", "~")) or (cwd / model).exists()):
        return model
    return absolute(model, cwd)


def absolute_paths(spec: RunSpec, cwd: Path | None = None) -> RunSpec:
    """The spec with dataset.files, a local model and reward models, script.path/source_dir, a resume checkpoint and
    parallelism.nvme_path absolute, and reward files shipped as their source (no other value changes)."""
    cwd = (cwd or Path.cwd()).absolute()
    updates: dict = {"model": local_model(spec.model, cwd)}
    if spec.dataset.files:
        files = {split: absolute(path, cwd) for split, path in spec.dataset.files.items()}
        updates["dataset"] = spec.dataset.model_copy(update={"files": files})
    if spec.script is not None:
        source_dir = spec.script.source_dir and absolute(spec.script.source_dir, cwd)
        updates["script"] = spec.script.model_copy(
            update={"path": absolute(spec.script.path, cwd), "source_dir": source_dir}
        )
    if spec.resume not in (None, "latest"):
        updates["resume"] = absolute(spec.resume, cwd)
    if spec.reward is not None:
        # a reward file travels inside the spec, as a notebook's function does: every backend carries it
        functions = [
            ShippedFunction(**ship_file(ref, cwd)) if _reward_file(ref) else ref for ref in spec.reward.functions
        ]
        models = [local_model(name, cwd) or name for name in spec.reward.models]  # a folder here, as model is
        updates["reward"] = spec.reward.model_copy(update={"functions": functions, "models": models})
    if spec.parallelism.nvme_path:
        updates["parallelism"] = spec.parallelism.model_copy(
            update={"nvme_path": absolute(spec.parallelism.nvme_path, cwd)}
        )
    return spec.model_copy(update=updates)


def _reward_file(ref) -> bool:
    """reward.functions entry `path/to/file.py:function` (not a module's, not shipped source)."""
    return isinstance(ref, str) and ref.rpartition(":")[0].endswith(".py")
