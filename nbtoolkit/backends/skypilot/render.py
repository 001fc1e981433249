"""The `skypilot` backend's work: validate (as the spec is built), render (pure), preflight, attach."""

from __future__ import annotations

import importlib.util
import sys

from nbtoolkit.backends import LaunchError
from nbtoolkit.backends.skypilot.settings import BUCKET_SCHEMES
from nbtoolkit.backends.skypilot.task import TASK_FILE, accelerators, data_mounts, settings, task_files
from nbtoolkit.inputs.data_files import files_not_shipped
from nbtoolkit.launching.launch import Launch, Stage
from nbtoolkit.launching.shipping import task_not_carried
from nbtoolkit.spec import RunSpec

NAME = "skypilot"
FOLLOWER = "nbtoolkit.backends.skypilot.follow"
#: a stop waits until SkyPilot reports the managed job cancelled (its controller tears the nodes down)
STOP_GRACE_S = 300.0
NEEDS_SKYPILOT = (
    "SkyPilot is not installed here; install it with pip install 'skypilot[aws]' (or the clouds you "
    "use) and run sky check"
)


def validate(spec: RunSpec) -> str | None:
    """The first thing wrong with a SkyPilot spec (or a skypilot block that would be ignored), as one sentence
    naming its field; None if it can run. The block's own fields are checked by its model."""
    block, hardware = settings(spec), spec.hardware
    if hardware.target != NAME:
        return (
            f"the skypilot block applies to hardware.target 'skypilot' (it is '{hardware.target}'); "
            "set hardware.target: skypilot or remove the block"
        )
    if hardware.accelerator != "cuda":
        return (
            f"hardware.accelerator '{hardware.accelerator}' does not run on SkyPilot here; a SkyPilot target "
            "runs on cloud GPUs: set hardware.accelerator: cuda"
        )
    if spec.script is not None:
        return (
            "script is not shipped to SkyPilot nodes (they get the job's folder only); remove script to run "
            "nbtoolkit's own training program"
        )
    unshipped = task_not_carried(spec, "a skypilot job")
    if unshipped:
        return unshipped
    if not block.managed:
        return (
            "skypilot.managed false is not supported: nbtoolkit launches managed jobs (they recover after a "
            "preemption); remove managed or set it true"
        )
    if block.region and not block.cloud:
        return f"skypilot.region '{block.region}' needs skypilot.cloud (a region belongs to one cloud), e.g. aws"
    if block.bucket and not block.bucket.startswith(BUCKET_SCHEMES):
        return (
            f"skypilot.bucket '{block.bucket}' is not a bucket URL; give e.g. s3://my-bucket/checkpoints "
            "or gs://my-bucket/checkpoints"
        )
    first = accelerators(spec, block)
    if first is None:
        return (
            "skypilot.accelerators is missing; name the GPU and count per node, e.g. A100:8, or a "
            "hardware.instance_type the catalog knows"
        )
    choices = {
        "skypilot.accelerators": first,
        **{
            f"skypilot.fallbacks.{index}.accelerators": fallback.accelerators
            for index, fallback in enumerate(block.fallbacks)
        },
    }
    for field, gpus in choices.items():  # the batch size, the plan and the DeepSpeed hostfile count on devices
        count = int(gpus.partition(":")[2] or 1)
        if count != hardware.devices:
            return (
                f"{field} '{gpus}' gives {count} GPU(s) per node, but hardware.devices is {hardware.devices}; "
                "make them agree"
            )
    return None


def notes(spec: RunSpec) -> list[str]:
    block = settings(spec)
    found = [
        (
            "needs SkyPilot with an enabled cloud (sky check); by hand: cd to this folder and run "
            f"sky jobs launch {TASK_FILE}"
        )
    ]
    if not block.bucket:
        found.append("no skypilot.bucket: checkpoints stay on the nodes, so a recovered job restarts from step 0")
    elif spec.train.save_steps is None:
        found.append(
            "without train.save_steps checkpoints are saved once per epoch: a recovered job repeats the epoch it was in"
        )
    return found


def transfers(spec: RunSpec) -> list[str]:
    """What a launch moves before the job starts, said by plan: local data files copied to every node."""
    return [
        f"dataset.files.{split}: {path} is copied to {remote} on every node by the task's file_mounts"
        for split, (remote, path) in data_mounts(spec).items()
    ]


def follower_stage(*args: str) -> Stage:
    return Stage(
        name="train", argv=[sys.executable, "-m", FOLLOWER, *args], metrics_from_log=True, stop_grace_s=STOP_GRACE_S
    )


def render(spec: RunSpec) -> Launch:
    unshipped = files_not_shipped(spec, "SkyPilot")
    if unshipped:
        raise LaunchError(unshipped)
    files = task_files(spec, settings(spec))
    return Launch(
        backend=NAME,
        stages=[follower_stage("--task", TASK_FILE)],
        env={"PYTHONUNBUFFERED": "1"},
        files=files,
        notes=notes(spec),
    )


def attach(name: str, region: str | None = None) -> Launch:
    """Follow a managed job launched elsewhere (`sky jobs launch`, another notebook, a job marked lost), by its id."""
    if not name.isdigit():
        raise LaunchError(
            f"'{name}' is not a SkyPilot managed job id; give the number sky jobs queue shows in its ID column"
        )
    if region is not None:
        raise LaunchError("a SkyPilot managed job is named by its id alone; leave out the region")
    if importlib.util.find_spec("sky") is None:
        raise LaunchError(NEEDS_SKYPILOT)
    return Launch(
        backend=NAME,
        stages=[follower_stage("--attach", name)],
        env={"PYTHONUNBUFFERED": "1"},
        notes=["needs SkyPilot, with the API server that launched the managed job"],
    )


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
        raise LaunchError(
            f"skypilot.cloud '{cloud}' is not enabled in SkyPilot (enabled: {', '.join(enabled)}); "
            f"run sky check {cloud} or pick an enabled cloud"
        )
