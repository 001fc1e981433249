"""The planner's forecast, kept at launch, beside what the job measured (nbtoolkit show, %job)."""

from __future__ import annotations

import pytest

from nbtoolkit.metrics.forecast import INFO_KEY, comparison_lines, forecast, measured
from nbtoolkit.runner.store import JobRecord

FLAN_T5_XXL = {
    "task": "summarization",
    "model": "google/flan-t5-xxl",
    "dataset": {"name": "cnn_dailymail", "config": "3.0.0", "max_length": 500, "max_target_length": 129},
    "hardware": {"instance_type": "p4d.24xlarge"},
    "launcher": "deepspeed",
    "parallelism": {"strategy": "deepspeed", "zero_stage": 3},
    "precision": "bf16",
    "train": {"epochs": 3, "batch_size": 8, "gradient_checkpointing": True},
}


def finished(info, hours=2.0):
    return JobRecord(
        id="f0",
        name="run",
        task="summarization",
        backend="deepspeed",
        status="succeeded",
        created=0.0,
        host="h",
        started=100.0,
        ended=100.0 + hours * 3600,
        info=info,
    )


def train(step, samples_per_second):
    return {
        "time": float(step),
        "step": step,
        "kind": "train",
        "loss": 1.0,
        "samples_per_second": samples_per_second,
        "window_seconds": 1.0,
    }


def test_the_forecast_of_a_gpu_run_has_memory_pace_time_and_cost():
    predicted = forecast(FLAN_T5_XXL)
    assert 25 < predicted["device_memory_gib"] < 40 and predicted["samples_per_second"] > 0
    assert predicted["hours"] > 1 and predicted["cost_usd"] > 100


def test_a_cpu_run_has_no_device_memory_to_forecast_and_an_unknown_model_no_forecast():
    assert forecast({"task": "text-classification"})["device_memory_gib"] is None
    assert forecast({"task": "causal-lm", "model": "someone/not-on-this-machine"}) is None


def test_show_prints_predicted_measured_and_their_ratio():
    predicted = {"device_memory_gib": 32.0, "samples_per_second": 20.0, "hours": 4.0, "cost_usd": 131.0}
    records = [train(step, 25.0) for step in range(10, 110, 10)]
    records.append({"time": 200.0, "step": 100, "kind": "summary", "peak_device_memory_mb": 36.0 * 1024})
    record = finished({INFO_KEY: predicted, "hourly_price_usd": 32.77})
    actual = measured(record, records)
    assert actual["device_memory_gib"] == pytest.approx(36.0) and actual["hours"] == pytest.approx(2.0)
    assert actual["cost_usd"] == pytest.approx(65.54)
    lines = comparison_lines(record, records)
    assert lines[0].split() == [
        "memory",
        "per",
        "device",
        "predicted",
        "32.0",
        "GiB",
        "measured",
        "36.0",
        "GiB",
        "1.12x",
    ]
    assert lines[1].endswith("1.25x") and lines[2].endswith("0.50x") and "$131.00" in lines[3]


def test_a_job_without_a_forecast_shows_what_it_measured():
    lines = comparison_lines(finished({}), [train(step, 40.0) for step in range(10, 60, 10)])
    assert lines and all("predicted          -" in line and "x" not in line.split()[-1] for line in lines)
