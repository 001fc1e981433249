"""The sagemaker backend's launch: render, and the checks it makes."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from nbtoolkit.backends import LaunchError
from nbtoolkit.backends.neuron.render import workers_problem
from nbtoolkit.backends.sagemaker.aws_errors import NO_CREDENTIALS, NO_REGION, SageMakerSetupError
from nbtoolkit.backends.sagemaker.container import code_files
from nbtoolkit.backends.sagemaker.data_channels import data_channels
from nbtoolkit.backends.sagemaker.export import export_files
from nbtoolkit.backends.sagemaker.images import huggingface_image_tag, training_image
from nbtoolkit.backends.sagemaker.instances import unknown_instance_message
from nbtoolkit.backends.sagemaker.job import JOB_FILE, training_job, with_data_channels
from nbtoolkit.backends.sagemaker.model_data import fetch_model, model_input
from nbtoolkit.launching.launch import Launch, Stage
from nbtoolkit.launching.shipping import task_not_carried
from nbtoolkit.spec import RunSpec

__all__ = ["attach", "fetch_model", "model_input", "preflight", "render", "transfers", "validate"]

NAME = "sagemaker"
FOLLOWER = "nbtoolkit.backends.sagemaker.follow"
#: a stop waits until SageMaker reports Stopped (it gives the container up to 120 s to exit)
STOP_GRACE_S = 300.0
NEEDS_SDK = "SageMaker jobs need the SageMaker Python SDK; install it with pip install 'nbtoolkit-finetune[sagemaker]'"


def follower_stage(name: str, args: list[str], metrics_from_log: bool) -> Stage:
    return Stage(
        name=name,
        argv=[sys.executable, "-m", FOLLOWER, *args],
        metrics_from_log=metrics_from_log,
        stop_grace_s=STOP_GRACE_S,
    )


def notes(spec: RunSpec) -> list[str]:
    found = [
        "needs AWS credentials (boto3's usual chain) and pip install 'nbtoolkit-finetune[sagemaker]'",
        "the same job as SageMaker SDK code: sagemaker/launch_v3.py (v3) and sagemaker/launch_v2.py (v2)",
        *uploads_said(spec),
    ]
    if spec.sagemaker.spot and spec.script is None and spec.train.save_steps is None:
        found.append("spot job without train.save_steps: after a spot interruption training restarts from step 0")
    return found


def validate(spec: RunSpec) -> str | None:
    """A SageMaker spec's problem: what the job needs (a role, an ml. instance type) and what SageMaker offers."""
    hardware = spec.hardware
    if spec.sagemaker is None or not spec.sagemaker.role:
        return (
            "sagemaker.role is missing; a SageMaker target needs an IAM role ARN (arn:aws:iam::<account>:role/<name>)"
        )
    if not hardware.instance_type:
        return "hardware.instance_type is missing; a SageMaker target needs one, e.g. ml.g5.2xlarge"
    if not hardware.instance_type.startswith("ml."):
        return (
            f"hardware.instance_type '{hardware.instance_type}' is not a SageMaker instance type; "
            f"SageMaker types start with 'ml.', e.g. ml.{hardware.instance_type}"
        )
    unshipped = task_not_carried(spec, "a sagemaker job")
    if unshipped:
        return unshipped
    try:
        training_job(spec)
    except SageMakerSetupError as exc:
        return str(exc)
    return workers_problem(spec)


def render(spec: RunSpec) -> Launch:
    try:
        job = with_data_channels(training_job(spec), spec)
    except SageMakerSetupError as exc:
        raise LaunchError(str(exc)) from None
    stages = [follower_stage("train", ["--job", JOB_FILE], metrics_from_log=True)]
    if job.precompile:  # its numbers come from graph tracing, not training: not metrics
        stages.insert(0, follower_stage("precompile", ["--job", JOB_FILE, "--phase", "precompile"], False))
    files = {
        **code_files(spec, container_image(spec)),
        JOB_FILE: job.model_dump_json(indent=2),
        **export_files(job, spec.display_name),
    }
    return Launch(backend=NAME, stages=stages, env={"PYTHONUNBUFFERED": "1"}, files=files, notes=notes(spec))


def transfers(spec: RunSpec) -> list[str]:
    """What a launch moves before the job starts, said by plan: local data files to the job's bucket."""
    try:
        training_job(spec)
        return uploads_said(spec)
    except (SageMakerSetupError, OSError):
        return []  # the spec's problem is validate's sentence, a missing file preflight's


def uploads_said(spec: RunSpec) -> list[str]:
    """One line per split with a local file: which file, its size, the object it is read from."""
    files = spec.dataset.files or {}
    if not files:
        return []
    objects = data_channels(files, spec.sagemaker.bucket or "").objects
    return [
        f"dataset.files.{split}: {path} ({Path(path).stat().st_size:,} bytes) is uploaded to {objects[split]} at "
        "launch, unless that content is there already (the key is its SHA-256)"
        for split, path in files.items()
    ]


def attach(name: str, region: str | None = None) -> Launch:
    """Follow a training job started elsewhere (the console, another notebook, a lost job)."""
    check_aws(region)
    args = ["--attach", name, *(["--region", region] if region else [])]
    return Launch(
        backend=NAME,
        stages=[follower_stage("train", args, metrics_from_log=True)],
        env={"PYTHONUNBUFFERED": "1"},
        notes=["needs AWS credentials (boto3's usual chain)"],
    )


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


def container_image(spec: RunSpec) -> str:
    """The training image the job runs: the explicit URI (Trainium's, or the spec's), else the Hugging Face DLC's
    tag its lookup resolves to (the SDK's retrieve adds only the registry)."""
    uri, lookup, versions = training_image(spec, spec.hardware.instance_type or "")
    if uri is not None:
        return uri
    if versions is not None:
        return huggingface_image_tag({**versions, **({"py_version": lookup["py_version"]} if lookup else {})})
    return f"{(lookup or {}).get('framework')}:{(lookup or {}).get('version')}"


def preflight(spec: RunSpec) -> None:
    if importlib.util.find_spec("sagemaker") is None:
        raise LaunchError(NEEDS_SDK)
    message = unknown_instance_message(spec.hardware.instance_type)
    if message:
        raise LaunchError(message)
    check_aws(spec.sagemaker.region)
