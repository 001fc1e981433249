"""The local backend's launch: render, and the checks it makes."""

from __future__ import annotations

import sys

from nbtoolkit.backends.program import launch_env, program_args, run_dir, writes_own_metrics
from nbtoolkit.launching.launch import Launch, Stage
from nbtoolkit.spec import RunSpec

NAME = "local"


def render(spec: RunSpec) -> Launch:
    stage = Stage(
        name="train",
        argv=[sys.executable, *program_args(spec)],
        metrics_from_log=not writes_own_metrics(spec),
    )
    return Launch(backend=NAME, stages=[stage], env=launch_env(spec), workdir=run_dir(spec))
