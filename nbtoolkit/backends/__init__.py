"""Backends turn a RunSpec into a Launch. Rendering is pure: no processes, no network.

Each backend is a module with `NAME`, `render(spec) -> Launch` and optionally
`preflight(spec)`: checks of this machine, run before submitting but not before exporting.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType
from typing import Protocol

from nbtoolkit.adapters import missing_package
from nbtoolkit.backends.launch import Launch, Stage
from nbtoolkit.credentials import credential_problem, redact_spec
from nbtoolkit.spec import RunSpec
from nbtoolkit.spec_paths import absolute_paths
from nbtoolkit.trackers import check_installed

__all__ = ["BACKENDS", "Backend", "Launch", "LaunchError", "Stage", "backend_name", "get_backend", "preflight", "render"]

#: backend name -> module implementing it (imported only when used)
BACKENDS: dict[str, str] = {
    "local": "nbtoolkit.backends.local",
    "torchrun": "nbtoolkit.backends.torchrun",
    "deepspeed": "nbtoolkit.backends.deepspeed",
    "neuron": "nbtoolkit.backends.neuron",
    "sagemaker": "nbtoolkit.backends.sagemaker",
    "slurm": "nbtoolkit.backends.slurm.backend",
}


class LaunchError(RuntimeError):
    """This machine cannot start the launch; the message says why and what to do."""


class Backend(Protocol):
    NAME: str

    def render(self, spec: RunSpec) -> Launch: ...


def backend_name(spec: RunSpec) -> str:
    """The backend a spec runs on: the explicit launcher, else inferred from target and parallelism.

    DeepSpeed runs render in the deepspeed backend, also when torchrun starts their processes. A Slurm
    target renders in the slurm backend, whose nodes run the launch of the same spec here.
    """
    if spec.hardware.target == "slurm":
        return "slurm"
    if spec.launcher == "torchrun" and spec.parallelism.strategy == "deepspeed":
        return "deepspeed"
    if spec.launcher != "auto":
        return spec.launcher
    if spec.hardware.target == "sagemaker":
        return "sagemaker"
    if spec.hardware.accelerator == "neuron":
        return "neuron"
    if spec.parallelism.strategy == "deepspeed":
        return "deepspeed"
    if spec.parallelism.strategy == "ddp" or spec.world_size > 1:
        return "torchrun"
    return "local"


def get_backend(name: str) -> ModuleType:
    if name not in BACKENDS:
        raise LaunchError(f"launcher '{name}' is not available here; available: {', '.join(sorted(BACKENDS))}")
    return importlib.import_module(BACKENDS[name])


def render(spec: RunSpec) -> Launch:
    """The spec's launch; its relative paths are taken from the caller's working directory (a job runs in its own)
    and credential values are redacted (a job gets them from the environment)."""
    return get_backend(backend_name(spec)).render(redact_spec(absolute_paths(spec)))


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
    check = getattr(get_backend(backend_name(spec)), "preflight", None)
    if check is not None:
        check(spec)
