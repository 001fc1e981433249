"""The planner takes the measured pace of past jobs of the same setup, and says so."""

from __future__ import annotations

import json

import pytest

from nbtoolkit import api, cli
from nbtoolkit.metrics.forecast import INFO_KEY as FORECAST
from nbtoolkit.metrics.forecast import PACE_FROM
from nbtoolkit.metrics.past_pace import INFO_KEY, setup_key
from nbtoolkit.spec import load_spec

GPU_SPEC = {
    "name": "qa",
    "task": "question-answering",
    "model": "bert-base-uncased",
    "hardware": {"instance_type": "g5.xlarge"},
    "dataset": {"name": "squad", "max_length": 384},
    "train": {"epochs": 1, "batch_size": 16},
}
TINY = {"name": "pace", "task": "text-classification", "train": {"max_steps": 24, "logging_steps": 3, "batch_size": 4}}


def past_job(store, spec, *, status="succeeded", paces=(10.0,)):
    """A job row of this spec's setup and its metrics.jsonl: a warm-up window, then windows at `paces`."""
    record = store.create(name="past", task=spec.task, backend="local", info={INFO_KEY: setup_key(spec)})
    store.update(record.id, status=status, started=1.0, ended=100.0)
    windows = [1.0, *paces]  # the first window is warm-up, which steady pace leaves out
    lines = [
        {
            "time": float(step),
            "step": step,
            "kind": "train",
            "loss": 1.0,
            "samples_per_second": pace,
            "window_seconds": 1.0,
        }
        for step, pace in enumerate(windows, start=1)
    ]
    (store.job_dir(record.id) / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    return record.id


def test_the_setup_key_ignores_names_seeds_prices_and_places_but_not_the_batch():
    spec = load_spec(GPU_SPEC)
    same = load_spec(
        {
            **GPU_SPEC,
            "name": "other",
            "train": {**GPU_SPEC["train"], "seed": 7},
            "hardware": {**GPU_SPEC["hardware"], "hourly_price_usd": 9.0, "master_addr": "10.0.0.2"},
        }
    )
    assert setup_key(same) == setup_key(spec)
    assert setup_key(load_spec({**GPU_SPEC, "train": {"epochs": 1, "batch_size": 32}})) != setup_key(spec)
    assert setup_key(load_spec({**GPU_SPEC, "precision": "fp16"})) != setup_key(spec)


def test_a_plan_takes_the_median_pace_of_past_succeeded_jobs_of_its_setup(store):
    spec = load_spec(GPU_SPEC)
    assumed = api.plan(spec, store=store)
    assert "assumed" in assumed.throughput_source
    ids = [past_job(store, spec, paces=(pace,)) for pace in (10.0, 30.0, 20.0)]
    past_job(store, spec, status="failed", paces=(1000.0,))
    past_job(store, load_spec({**GPU_SPEC, "train": {"epochs": 1, "batch_size": 8}}), paces=(500.0,))
    result = api.plan(spec, store=store)
    assert result.samples_per_second == pytest.approx(20.0)
    assert result.hours == pytest.approx(assumed.hours * assumed.samples_per_second / 20.0)
    assert "measured 20.0 samples/s over 3 past jobs of this setup" in result.throughput_source
    assert all(job in result.throughput_source for job in ids)
    assert api.plan(spec, store=store, past_jobs=False).samples_per_second == assumed.samples_per_second
    assert api.plan(spec, store=store, measured=50.0).samples_per_second == pytest.approx(50.0)


def test_nbtoolkit_plan_says_where_its_pace_comes_from(store, tmp_path, capsys):
    spec = load_spec(GPU_SPEC)
    past_job(store, spec, paces=(12.0, 12.0))
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(GPU_SPEC))
    cli.main(["plan", str(path)])
    assert "measured 12.0 samples/s over 1 past job of this setup" in capsys.readouterr().out
    cli.main(["plan", str(path), "--no-past-jobs"])
    assert "past job" not in capsys.readouterr().out


def test_a_launch_records_its_setup_and_the_next_one_is_forecast_at_its_measured_pace(store):
    first = api.launch(TINY, store=store)
    assert first.wait(timeout=300) == "succeeded", first.logs(tail=20)
    assert first.record.info[INFO_KEY] == setup_key(load_spec(TINY))
    assert first.record.info[FORECAST][PACE_FROM] is None
    paces = [record["samples_per_second"] for record in first.records() if record.get("kind") == "train"]
    second = api.launch({**TINY, "name": "pace-again"}, store=store)
    try:
        predicted = second.record.info[FORECAST]
        assert predicted[PACE_FROM] == f"1 past job of this setup ({first.id})"
        assert min(paces) <= predicted["samples_per_second"] <= max(paces)
    finally:
        second.stop()
