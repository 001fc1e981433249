"""The `skypilot` backend: a SkyPilot managed job on whichever cloud SkyPilot finds capacity in.

`settings` reads the spec's `skypilot:` block and names its problems, `task` renders the task
YAML and the folder every node runs in (pure), and `follow` is the program a job's supervisor
runs: it launches the managed job with SkyPilot's Python API, streams its log, and cancels it on
a stop. Importing this package imports nothing of SkyPilot.
"""

from __future__ import annotations

import importlib.util
import sys

from nbtoolkit.backends import Backend, LaunchError
from nbtoolkit.backends.program import spec_files
from nbtoolkit.backends.skypilot.settings import problem, settings
from nbtoolkit.backends.skypilot.task import TASK_FILE, task_files
from nbtoolkit.launches import Launch, Stage
from nbtoolkit.spec import RunSpec

NAME = "skypilot"
FOLLOWER = f"{__name__}.follow"
#: a stop waits until SkyPilot reports the managed job cancelled (its controller tears the nodes down)
STOP_GRACE_S = 300.0
NEEDS_SKYPILOT = ("SkyPilot is not installed here; install it with pip install 'skypilot[aws]' (or the clouds you "
                  "use) and run sky check")


def notes(spec: RunSpec) -> list[str]:
    block = settings(spec)
    found = ["needs SkyPilot with an enabled cloud (sky check); by hand: cd to this folder and run "
             f"sky jobs launch {TASK_FILE}"]
    if not block.bucket:
        found.append("no skypilot.bucket: checkpoints stay on the nodes, so a recovered job restarts from step 0")
    elif spec.train.save_steps is None:
        found.append("without train.save_steps checkpoints are saved once per epoch: a recovered job repeats "
                     "the epoch it was in")
    return found


def follower_stage(*args: str) -> Stage:
    return Stage(name="train", argv=[sys.executable, "-m", FOLLOWER, *args], metrics_from_log=True,
                 stop_grace_s=STOP_GRACE_S)


def render(spec: RunSpec) -> Launch:
    message = problem(spec)
    if message:
        raise LaunchError(message)
    files = {**spec_files(spec), **task_files(spec, settings(spec))}
    return Launch(backend=NAME, stages=[follower_stage("--task", TASK_FILE)], env={"PYTHONUNBUFFERED": "1"},
                  files=files, notes=notes(spec))


def attach_launch(name: str, region: str | None = None) -> Launch:
    """Follow a managed job launched elsewhere (`sky jobs launch`, another notebook, a job marked lost), by its id."""
    if not name.isdigit():
        raise LaunchError(f"'{name}' is not a SkyPilot managed job id; give the number sky jobs queue shows in its ID "
                          "column")
    if region is not None:
        raise LaunchError("a SkyPilot managed job is named by its id alone; leave out the region")
    if importlib.util.find_spec("sky") is None:
        raise LaunchError(NEEDS_SKYPILOT)
    return Launch(backend=NAME, stages=[follower_stage("--attach", name)], env={"PYTHONUNBUFFERED": "1"},
                  notes=["needs SkyPilot, with the API server that launched the managed job"])


def preflight(spec: RunSpec) -> None:
    """SkyPilot is importable and `sky check` has enabled a cloud (the spec's, when it names one)."""
    if importlib.util.find_spec("sky") is None:
        raise LaunchError(NEEDS_SKYPILOT)
    from sky.client import sdk  # where `sky check`'s results are read (sky.enabled_clouds is not exported)

    enabled = [str(cloud).lower() for cloud in sdk.get(sdk.enabled_clouds())]
    if not enabled:
        raise LaunchError("SkyPilot has no enabled cloud; run sky check and set up the credentials of a cloud it lists")
    cloud = settings(spec).cloud
    if cloud and cloud.lower() not in enabled:
        raise LaunchError(f"skypilot.cloud '{cloud}' is not enabled in SkyPilot (enabled: {', '.join(enabled)}); "
                          f"run sky check {cloud} or pick an enabled cloud")


backend = Backend(name=NAME, render=render, target=NAME, validate=problem, preflight=preflight, attach=attach_launch)
