"""The `sagemaker` backend: a SageMaker training job, submitted and followed by a detached follower.

`render` is pure: it describes the training job (remote/sagemaker_job.py) and returns a Launch
whose stage runs the follower (remote/sagemaker_follow.py), with the job's code files, the
description (`sagemaker/job.json`) and the same job as SDK v3 and v2 Python
(`sagemaker/launch_v3.py`, `sagemaker/launch_v2.py`). `preflight` checks, before anything is
sent, what this machine can check: the SDK is installed, credentials and a region are found,
and SageMaker offers the instance type.
"""

from __future__ import annotations

import importlib.util
import sys

from nbtoolkit.backends import LaunchError
from nbtoolkit.backends.launch import Launch, Stage
from nbtoolkit.backends.program import spec_files
from nbtoolkit.remote.aws_errors import NO_CREDENTIALS, NO_REGION
from nbtoolkit.remote.sagemaker_export import export_files
from nbtoolkit.remote.sagemaker_instances import unknown_instance_message
from nbtoolkit.remote.sagemaker_job import JOB_FILE, SageMakerSetupError, code_files, training_job
from nbtoolkit.spec import RunSpec

NAME = "sagemaker"
FOLLOWER = "nbtoolkit.remote.sagemaker_follow"
#: a stop waits until SageMaker reports Stopped (it gives the container up to 120 s to exit)
STOP_GRACE_S = 300.0
NEEDS_SDK = "SageMaker jobs need the SageMaker Python SDK; install it with pip install 'nbtoolkit-finetune[sagemaker]'"


def follower_stage(name: str, args: list[str], metrics_from_log: bool) -> Stage:
    return Stage(name=name, argv=[sys.executable, "-m", FOLLOWER, *args], metrics_from_log=metrics_from_log,
                 stop_grace_s=STOP_GRACE_S)


def notes(spec: RunSpec) -> list[str]:
    found = ["needs AWS credentials (boto3's usual chain) and pip install 'nbtoolkit-finetune[sagemaker]'",
             "the same job as SageMaker SDK code: sagemaker/launch_v3.py (v3) and sagemaker/launch_v2.py (v2)"]
    if spec.sagemaker.spot and spec.script is None and spec.train.save_steps is None:
        found.append("spot job without train.save_steps: after a spot interruption training restarts from step 0")
    return found


def render(spec: RunSpec) -> Launch:
    try:
        job = training_job(spec)
    except SageMakerSetupError as exc:
        raise LaunchError(str(exc)) from None
    stages = [follower_stage("train", ["--job", JOB_FILE], metrics_from_log=True)]
    if job.precompile:  # its numbers come from graph tracing, not training: not metrics
        stages.insert(0, follower_stage("precompile", ["--job", JOB_FILE, "--phase", "precompile"], False))
    files = {**spec_files(spec), **code_files(spec), JOB_FILE: job.model_dump_json(indent=2),
             **export_files(job, spec.display_name)}
    return Launch(backend=NAME, stages=stages, env={"PYTHONUNBUFFERED": "1"}, files=files, notes=notes(spec))


def attach_launch(name: str, region: str | None = None) -> Launch:
    """Follow a training job started elsewhere (the console, another notebook, a lost job)."""
    args = ["--attach", name, *(["--region", region] if region else [])]
    return Launch(backend=NAME, stages=[follower_stage("train", args, metrics_from_log=True)],
                  env={"PYTHONUNBUFFERED": "1"}, notes=["needs AWS credentials (boto3's usual chain)"])


def check_aws(region: str | None) -> None:
    """boto3's chain finds credentials and a region (nothing is sent)."""
    if importlib.util.find_spec("boto3") is None:
        raise LaunchError(NEEDS_SDK)
    import boto3

    session = boto3.Session(region_name=region) if region else boto3.Session()
    if session.get_credentials() is None:
        raise LaunchError(NO_CREDENTIALS)
    if session.region_name is None:
        raise LaunchError(NO_REGION)


def preflight(spec: RunSpec) -> None:
    if importlib.util.find_spec("sagemaker") is None:
        raise LaunchError(NEEDS_SDK)
    message = unknown_instance_message(spec.hardware.instance_type)
    if message:
        raise LaunchError(message)
    check_aws(spec.sagemaker.region)
