"""Watching costs the server little whatever the run's size: long series downsampled with their extremes and
their end kept, an ended job's detail read from the end of its metrics, and 304 for a job that has not changed."""

from __future__ import annotations

import json
import random

from tornado.httpclient import HTTPClientError

from nbtoolkit.metrics.series import METRICS_FILE
from nbtoolkit.server.service import DOWNSAMPLE_READ_BYTES, METRICS_PAGE_BYTES
from tests.server.test_handlers import API, finished_job, get_json

STEPS, SPIKE, DIP = 7000, 5001, 3003


def long_run(store):
    """An ended job with about 1.5 MB of metrics: noisy train losses with one spike and one dip, evals every 500."""
    job = finished_job(store, losses=())
    rng = random.Random(7)
    with open(store.job_dir(job.id) / METRICS_FILE, "w") as metrics:
        for step in range(1, STEPS + 1):
            loss = 9.5 if step == SPIKE else 0.01 if step == DIP else 1 + rng.random()
            train = {"time": 1000.0 + step, "step": step, "kind": "train", "loss": loss, "learning_rate": 1e-4}
            metrics.write(json.dumps({**train, "samples_per_second": 50.0, "padding": "x" * 120}) + "\n")
            if step % 500 == 0:
                metrics.write(
                    json.dumps({"time": 1000.0 + step, "step": step, "kind": "eval", "eval_loss": 1.0}) + "\n"
                )
    return job


async def test_a_long_series_comes_downsampled_with_its_extremes_and_its_end(jp_fetch, store):
    job = long_run(store)
    size = (store.job_dir(job.id) / METRICS_FILE).stat().st_size
    assert METRICS_PAGE_BYTES < size < DOWNSAMPLE_READ_BYTES  # more than a page; read whole, so extremes are exact
    page = await get_json(jp_fetch, "jobs", job.id, "metrics", since="0", points="100")
    train = [record for record in page["records"] if record["kind"] == "train"]
    assert page["downsampled"] and page["next"] == size
    assert len(page["records"]) <= 100 * 3 * 2 and len(json.dumps(page)) < 100_000
    assert [record["step"] for record in train] == sorted(record["step"] for record in train)
    assert {SPIKE, DIP} <= {record["step"] for record in train}  # the spike and the dip both show
    assert page["records"][-1] == {"time": 1000.0 + STEPS, "step": STEPS, "kind": "eval", "eval_loss": 1.0}
    assert train[-1]["step"] == STEPS
    # from there on, only what is new, every record
    newer = await get_json(jp_fetch, "jobs", job.id, "metrics", since=str(page["next"]), points="100")
    assert newer["records"] == [] and not newer["downsampled"]
    # without points: pages of every record, as before
    first = await get_json(jp_fetch, "jobs", job.id, "metrics", since="0")
    assert not first["downsampled"] and [r["step"] for r in first["records"][:3]] == [1, 2, 3]


async def test_an_ended_jobs_detail_reads_the_end_of_its_metrics(jp_fetch, store):
    job = long_run(store)
    store.set_info(job.id, "forecast", {"samples_per_second": 40.0})
    detail = await get_json(jp_fetch, "jobs", job.id)
    assert detail["planned"][0].split() == ["steady", "samples/s", "predicted", "40.0", "measured", "50.0", "1.25x"]


async def test_a_job_that_did_not_change_is_answered_304(jp_fetch, store):
    job = finished_job(store)
    first = await jp_fetch(API, "jobs", job.id)
    etag = first.headers["ETag"]
    # RFC 9110: If-None-Match compares weakly (W/"x" matches "x"), and * matches any job that exists
    for known in (etag, f"W/{etag}", f'"other", W/{etag}', "*"):
        try:
            await jp_fetch(API, "jobs", job.id, headers={"If-None-Match": known})
            raise AssertionError(f"a job that did not change was sent again for If-None-Match: {known}")
        except HTTPClientError as unchanged:
            assert unchanged.code == 304 and not unchanged.response.body
    with open(store.job_dir(job.id) / METRICS_FILE, "a") as metrics:
        metrics.write(json.dumps({"time": 2000.0, "step": 40, "kind": "train", "loss": 0.5}) + "\n")
    changed = await jp_fetch(API, "jobs", job.id, headers={"If-None-Match": etag})
    assert changed.code == 200 and changed.headers["ETag"] != etag and json.loads(changed.body)["id"] == job.id
