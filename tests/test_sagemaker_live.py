"""Opt-in, costs money: one real SageMaker training job (a tiny run on ml.g5.xlarge, about 10 minutes).

Runs only when NBTOOLKIT_LIVE_SAGEMAKER_ROLE names an IAM role SageMaker can assume and boto3 finds
real credentials. Without the role it reports itself skipped with the reason; with the role but no
AWS to reach, it fails (a live run was asked for). Optional:
NBTOOLKIT_LIVE_SAGEMAKER_BUCKET (default: the SDK's sagemaker-<region>-<account> bucket),
NBTOOLKIT_LIVE_SAGEMAKER_INSTANCE (default ml.g5.xlarge).
"""

from __future__ import annotations

import os

import pytest

from nbtoolkit.api import launch

ROLE = os.environ.get("NBTOOLKIT_LIVE_SAGEMAKER_ROLE")
pytestmark = pytest.mark.skipif(
    not ROLE,
    reason="live SageMaker test: set NBTOOLKIT_LIVE_SAGEMAKER_ROLE and AWS "
    "credentials to run a real (billed) training job",
)


def live_run_refused() -> str | None:
    """Why a live run asked for by NBTOOLKIT_LIVE_SAGEMAKER_ROLE cannot go ahead here, else None."""
    try:
        import boto3
        import sagemaker.train  # noqa: F401  (only whether it imports)
    except ImportError:
        return "the SageMaker SDK is not installed (pip install 'nbtoolkit-finetune[sagemaker]')"
    if os.environ.get("AWS_ENDPOINT_URL"):
        return f"AWS_ENDPOINT_URL points at {os.environ['AWS_ENDPOINT_URL']}, not AWS"
    try:
        boto3.client("sts").get_caller_identity()
    except Exception as exc:  # no or bad credentials
        return f"boto3 found no AWS credentials that STS accepts ({exc})"
    return None


def test_a_real_training_job_runs_and_reports_billable_time(home):
    # the role says a live run was asked for: without AWS that is a failure, not a skip
    refused = live_run_refused()
    if refused:
        pytest.fail(f"NBTOOLKIT_LIVE_SAGEMAKER_ROLE is set but {refused}")
    spec = {
        "name": "nbtoolkit-live-test",
        "task": "text-classification",
        "train": {"max_steps": 30, "logging_steps": 10, "batch_size": 16, "learning_rate": 0.003},
        "hardware": {
            "target": "sagemaker",
            "instance_type": os.environ.get("NBTOOLKIT_LIVE_SAGEMAKER_INSTANCE", "ml.g5.xlarge"),
        },
        "sagemaker": {"role": ROLE, "bucket": os.environ.get("NBTOOLKIT_LIVE_SAGEMAKER_BUCKET"), "max_run": 1800},
    }
    job = launch(spec)
    assert job.wait(timeout=3600) == "succeeded", job.logs(tail=50)
    train = [record for record in job.records() if record["kind"] == "train"]
    assert [record["step"] for record in train] == [10, 20, 30]
    info = job.record.info
    assert info["status"] == "Completed" and info["billable_seconds"] > 0 and not info["cost_estimated"]
