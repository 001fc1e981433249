"""The backend registry: which backend runs a spec, and the calls every backend answers.

A backend is a package whose `backend` object (a `Backend`) names its `hardware.target`, the spec
block it owns (`sagemaker:`, `neuron:`, ...) and the module that renders a spec into a Launch (pure:
no processes, no network). Packages register through the entry-point group `nbtoolkit.backends`
(nbtoolkit's own in its pyproject.toml), so another distribution can add one without touching
nbtoolkit; the core reaches backends only through this module.

This module and every backend's package `__init__` stay light (no spec import at run time): the
spec gathers the backends' blocks while it is itself being imported. What needs a RunSpec to work,
a spec's launch and this machine's checks of it, is `nbtoolkit.backends.dispatch` (render, preflight).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from functools import cache
from types import ModuleType
from typing import TYPE_CHECKING

from nbtoolkit import plugins

if TYPE_CHECKING:
    from pydantic import BaseModel

    from nbtoolkit.launching.launch import Launch
    from nbtoolkit.spec import RunSpec

__all__ = [
    "ENTRY_POINT_GROUP",
    "LOCAL",
    "Backend",
    "LaunchError",
    "backend_name",
    "get_backend",
    "names",
    "problem",
    "registered",
    "select",
    "serving",
    "targets",
]

ENTRY_POINT_GROUP = "nbtoolkit.backends"
#: the target of every backend that starts processes on this machine (or, by run.sh, on others by hand)
LOCAL = "local"


class LaunchError(RuntimeError):
    """This machine cannot start the launch; the message says why and what to do."""


@dataclass(frozen=True)
class Backend:
    """A backend as registered. `implementation` is the module imported when the backend is first used:
    it defines `render(spec) -> Launch` and may define

    - `validate(spec) -> str | None`: the spec's problem for this backend, one sentence that names
      its field; it runs whenever a spec is built, so the form shows it beside the field;
    - `preflight(spec)`: checks of this machine, run before submitting (not before exporting),
      raising LaunchError;
    - `attach(name, region) -> Launch`: follow a job started elsewhere;
    - `container_image(spec) -> str | None`: the image the run's program runs in, where the backend picks one
      (its tag names the libraries: nbtoolkit.rehearsal.image_envs reads it).

    `target`: the `hardware.target` it serves; "local" for launchers that start processes here, or
    the name of a remote engine. `block`: the pydantic model of the spec block it owns, under its own
    name; with `block_by_default` a spec that omits the block gets one with its defaults (else the
    block is None, and left out of a saved spec). `priced_by_catalog`: its nodes cost what the catalog
    says `hardware.instance_type` costs (a cloud's); False for a cluster whose nodes nobody prices.
    """

    name: str
    implementation: str
    target: str = LOCAL
    block: type[BaseModel] | None = None
    block_by_default: bool = False
    priced_by_catalog: bool = True

    def module(self) -> ModuleType:
        return importlib.import_module(self.implementation)

    def render(self, spec: RunSpec) -> Launch:
        return self.module().render(spec)

    def validate(self, spec: RunSpec) -> str | None:
        check = getattr(self.module(), "validate", None)
        return check(spec) if check is not None else None

    def preflight(self, spec: RunSpec) -> None:
        check = getattr(self.module(), "preflight", None)
        if check is not None:
            check(spec)

    def container_image(self, spec: RunSpec) -> str | None:
        image = getattr(self.module(), "container_image", None)
        return image(spec) if image is not None else None

    @property
    def attaches(self) -> bool:
        return hasattr(self.module(), "attach")

    def attach(self, name: str, region: str | None = None) -> Launch:
        if not self.attaches:
            raise LaunchError(
                f"the {self.name} backend cannot follow a job started elsewhere; those that can: "
                f"{', '.join(backend for backend in names() if get_backend(backend).attaches)}"
            )
        return self.module().attach(name, region)


@cache
def registered() -> dict[str, Backend]:
    """Every backend whose package loads, by name (plugins.loaded: a broken one, or one taking a name already taken,
    is named in a warning and left out)."""
    return {entry.name: backend for entry, backend in plugins.loaded(ENTRY_POINT_GROUP, Backend, "backend")}


def names() -> list[str]:
    """Every registered backend's name (a spec's `launcher` may name any of them)."""
    return sorted(registered())


def get_backend(name: str) -> Backend:
    if name not in registered():
        raise LaunchError(f"launcher '{name}' is not available here; available: {', '.join(names())}")
    return registered()[name]


def targets() -> list[str]:
    """Every `hardware.target` some registered backend serves, "local" first."""
    return [LOCAL, *sorted({backend.target for backend in registered().values()} - {LOCAL})]


def serving(target: str) -> Backend | None:
    """The backend that serves a remote `hardware.target` (None for "local": several launchers serve it)."""
    return next((backend for backend in registered().values() if target != LOCAL and backend.target == target), None)


def backend_name(spec: RunSpec) -> str:
    """The backend a spec runs on: a remote target's backend; else the explicit launcher, or the one
    its accelerator and parallelism call for. DeepSpeed runs render in the deepspeed backend, also when
    torchrun starts their processes."""
    remote = serving(spec.hardware.target)
    if remote is not None:
        return remote.name
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


def transfers(spec: RunSpec) -> list[str]:
    """What launching the spec moves before its job starts, in words (the backend's optional `transfers`: a
    SageMaker job's local data files uploaded to its bucket); plan and the form's checks say it."""
    said = getattr(select(spec).module(), "transfers", None)
    return said(spec) if said else []


def problem(spec: RunSpec) -> str | None:
    """What the backends find wrong with a spec (RunSpec asks when it is built): the one it runs on, and
    each whose block the spec sets to something other than its defaults."""
    chosen = select(spec)
    asked = [
        chosen,
        *(backend for backend in registered().values() if backend is not chosen and _sets_block(spec, backend)),
    ]
    return next((found for backend in asked if (found := backend.validate(spec))), None)


def _sets_block(spec: RunSpec, backend: Backend) -> bool:
    if backend.block is None:  # it owns no block of the spec
        return False
    given = getattr(spec, backend.name)
    return given is not None and given != backend.block()
