"""The backend registry: which backend runs a spec, and the calls every backend answers.

A backend is a package that turns a RunSpec into a Launch (pure: no processes, no network) and
exposes a `Backend` as `backend`. Packages register through the entry-point group
`nbtoolkit.backends` (nbtoolkit's own in its pyproject.toml), so another distribution can add one
without touching nbtoolkit; the core reaches backends only through this module.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path

from nbtoolkit.adapters import missing_package
from nbtoolkit.credentials import credential_problem, redact_spec
from nbtoolkit.launches import Launch, Stage
from nbtoolkit.spec import RunSpec
from nbtoolkit.spec_paths import absolute_paths
from nbtoolkit.trackers import check_installed

__all__ = ["ENTRY_POINT_GROUP", "Backend", "Launch", "LaunchError", "Stage", "backend_name", "get_backend", "names",
           "preflight", "problem", "render", "select", "targets"]

ENTRY_POINT_GROUP = "nbtoolkit.backends"
#: the target of every backend that starts processes on this machine (or, by run.sh, on others by hand)
LOCAL = "local"


class LaunchError(RuntimeError):
    """This machine cannot start the launch; the message says why and what to do."""


@dataclass(frozen=True)
class Backend:
    """What a backend answers. Only `name` and `render` are required.

    `target`: the `hardware.target` it serves; "local" for launchers that start processes here, or
    the name of a remote engine whose spec it renders. `validate(spec)`: the first problem of a spec
    it runs (its own block, its rules) as one sentence naming the field, or None; the spec raises it
    when loaded, so every front says it before anything starts. `preflight(spec)`: checks of this machine,
    run before submitting (not before exporting); raises LaunchError. `attach(name, region)`: a
    Launch that follows a job started elsewhere.
    """

    name: str
    render: Callable[[RunSpec], Launch]
    target: str = LOCAL
    validate: Callable[[RunSpec], str | None] | None = None
    preflight: Callable[[RunSpec], None] | None = None
    attach: Callable[..., Launch] | None = None


@cache
def _entry_points() -> dict[str, EntryPoint]:
    return {entry.name: entry for entry in entry_points(group=ENTRY_POINT_GROUP)}


def names() -> list[str]:
    """Every registered backend's name (a spec's `launcher` may name any of them)."""
    return sorted(_entry_points())


@cache
def get_backend(name: str) -> Backend:
    """The registered backend `name`, imported on first use."""
    entry = _entry_points().get(name)
    if entry is None:
        raise LaunchError(f"launcher '{name}' is not available here; available: {', '.join(names())}")
    backend = entry.load()
    if not isinstance(backend, Backend) or backend.name != name:
        raise LaunchError(f"the backend registered as '{name}' ({entry.value}) is not a nbtoolkit Backend named "
                          f"'{name}'; fix its entry point in the group {ENTRY_POINT_GROUP}")
    return backend


@cache
def targets() -> list[str]:
    """Every `hardware.target` some registered backend serves, "local" first."""
    served = {get_backend(name).target for name in names()}
    return [LOCAL, *sorted(served - {LOCAL})]


def backend_name(spec: RunSpec) -> str:
    """The backend a spec runs on: a remote target's backend; else the explicit launcher, or the one
    its accelerator and parallelism call for. DeepSpeed runs render in the deepspeed backend, also when
    torchrun starts their processes."""
    target = spec.hardware.target
    if target != LOCAL:
        return next(name for name in names() if get_backend(name).target == target)
    if spec.launcher == "torchrun" and spec.parallelism.strategy == "deepspeed":
        return "deepspeed"
    if spec.launcher != "auto":
        return spec.launcher
    if spec.hardware.accelerator == "neuron":
        return "neuron"
    if spec.parallelism.strategy == "deepspeed":
        return "deepspeed"
    if spec.parallelism.strategy == "ddp" or spec.world_size > 1:
        return "torchrun"
    return "local"


def select(spec: RunSpec) -> Backend:
    """The one place a spec's backend is chosen: render, preflight and the form's checks all ask here."""
    return get_backend(backend_name(spec))


def problem(spec: RunSpec) -> str | None:
    """What the spec's backend finds wrong with it (one sentence), or None."""
    check = select(spec).validate
    return check(spec) if check is not None else None


def render(spec: RunSpec) -> Launch:
    """The spec's launch; its relative paths are taken from the caller's working directory (a job runs in its own)
    and credential values are redacted (a job gets them from the environment)."""
    return select(spec).render(redact_spec(absolute_paths(spec)))


def preflight(spec: RunSpec) -> None:
    """Raise LaunchError if this machine cannot start the spec (checked at submit, not at export)."""
    problem = credential_problem(spec)
    if problem:
        raise LaunchError(problem)
    if spec.script is not None and not Path(spec.script.path).expanduser().is_file():
        raise LaunchError(f"script.path {spec.script.path} does not exist; give the path of your training script")
    missing = missing_package(spec) or check_installed(spec)
    if missing:
        raise LaunchError(missing)
    check = select(spec).preflight
    if check is not None:
        check(spec)
