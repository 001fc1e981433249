"""Opt-in, costs money: one real SageMaker training job (a tiny run on ml.g5.xlarge, about 10 minutes).

Runs only when NBTOOLKIT_LIVE_SAGEMAKER_ROLE names an IAM role SageMaker can assume and boto3 finds
real credentials; otherwise it reports itself skipped with the reason. Optional:
NBTOOLKIT_LIVE_SAGEMAKER_BUCKET (default: the SDK's sagemaker-<region>-<account> bucket),
NBTOOLKIT_LIVE_SAGEMAKER_INSTANCE (default ml.g5.xlarge).
"""

from __future__ import annotations

import os

import pytest

from nbtoolkit.api import launch

ROLE = os.environ.get("NBTOOLKIT_LIVE_SAGEMAKER_ROLE")
pytestmark = pytest.mark.skipif(not ROLE, reason="live SageMaker test: set NBTOOLKIT_LIVE_SAGEMAKER_ROLE and AWS "
                                                 "credentials to run a real (billed) training job")


def real_identity() -> str | None:
    pytest.importorskip("sagemaker.train", reason="the SageMaker SDK (nbtoolkit[sagemaker]) is not installed")
    import boto3

    if os.environ.get("AWS_ENDPOINT_URL"):
        return None  # pointed at a stand-in, not AWS
    try:
        return boto3.client("sts").get_caller_identity()["Account"]
    except Exception:  # no or bad credentials: not a live run
        return None


def test_a_real_training_job_runs_and_reports_billable_time(home):
    if real_identity() is None:
        pytest.skip("live SageMaker test: no working AWS credentials (boto3's chain found none that STS accepts)")
    spec = {"name": "nbtoolkit-live-test", "task": "text-classification",
            "train": {"max_steps": 30, "logging_steps": 10, "batch_size": 16, "learning_rate": 0.003},
            "hardware": {"target": "sagemaker",
                         "instance_type": os.environ.get("NBTOOLKIT_LIVE_SAGEMAKER_INSTANCE", "ml.g5.xlarge")},
            "sagemaker": {"role": ROLE, "bucket": os.environ.get("NBTOOLKIT_LIVE_SAGEMAKER_BUCKET"), "max_run": 1800}}
    job = launch(spec)
    assert job.wait(timeout=3600) == "succeeded", job.logs(tail=50)
    train = [record for record in job.records() if record["kind"] == "train"]
    assert [record["step"] for record in train] == [10, 20, 30]
    info = job.record.info
    assert info["status"] == "Completed" and info["billable_seconds"] > 0 and not info["cost_estimated"]
