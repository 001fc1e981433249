"""The `local` backend: one python process on this machine."""

from __future__ import annotations

import sys

from nbtoolkit.backends import Backend
from nbtoolkit.launches import Launch, Stage
from nbtoolkit.backends.program import launch_env, program_args, run_dir, spec_files, writes_own_metrics
from nbtoolkit.spec import RunSpec

NAME = "local"


def render(spec: RunSpec) -> Launch:
    stage = Stage(
        name="train",
        argv=[sys.executable, *program_args(spec)],
        metrics_from_log=not writes_own_metrics(spec),
    )
    return Launch(backend=NAME, stages=[stage], env=launch_env(spec), files=spec_files(spec), workdir=run_dir(spec))


backend = Backend(name=NAME, render=render)
