"""The job REST API through a real Jupyter server: auth, id checks, paging, incremental reads, stop."""

from __future__ import annotations

import json
import time

import psutil
import pytest
from tornado.httpclient import HTTPClientError

from nbtoolkit.api import launch
from nbtoolkit.metrics.series import METRICS_FILE
from nbtoolkit.runner.store import LOG_FILE
from tests.conftest import SCRIPTS

API = "nbtoolkit/api"


async def get_json(jp_fetch, *parts, **params):
    response = await jp_fetch(API, *parts, params=params)
    assert response.code == 200
    return json.loads(response.body)


async def error_of(fetching) -> tuple[int, dict]:
    with pytest.raises(HTTPClientError) as caught:
        await fetching
    body = caught.value.response.body if caught.value.response is not None else b""
    return caught.value.code, json.loads(body) if body.startswith(b"{") else {}


def finished_job(store, name="done", status="succeeded", losses=(2.0, 1.5, 1.0), log="line 1\nline 2\n", **values):
    record = store.create(name=name, task="text-classification", backend="local", info={"hourly_price_usd": 3.6})
    directory = store.job_dir(record.id)
    (directory / LOG_FILE).write_text(log)
    with open(directory / METRICS_FILE, "w") as metrics:
        for step, loss in enumerate(losses, start=1):
            metrics.write(
                json.dumps(
                    {
                        "time": 1000.0 + step,
                        "step": step * 10,
                        "kind": "train",
                        "loss": loss,
                        "samples_per_second": 50.0,
                        "max_steps": 30,
                    }
                )
                + "\n"
            )
    store.update(
        record.id,
        status=status,
        started=1000.0,
        ended=1100.0,
        step=30,
        total_steps=30,
        loss=losses[-1] if losses else None,
        samples_per_second=50.0,
        **values,
    )
    return store.get(record.id)


ENDPOINTS = [
    ("GET", "jobs"),
    ("GET", "jobs/{id}"),
    ("GET", "jobs/{id}/metrics"),
    ("GET", "jobs/{id}/log"),
    ("POST", "jobs/{id}/stop"),
    ("GET", "jobs/{id}/health"),
    ("POST", "jobs/{id}/stacks"),
    ("POST", "jobs/{id}/checkpoint"),
    ("POST", "jobs/{id}/fork"),
]


@pytest.mark.parametrize("method,path", ENDPOINTS)
async def test_every_endpoint_refuses_a_request_without_a_token(jp_fetch, store, method, path):
    job = finished_job(store)
    code, _ = await error_of(
        jp_fetch(
            API,
            path.format(id=job.id),
            method=method,
            headers={"Authorization": ""},
            body=b"" if method == "POST" else None,
        )
    )
    assert code == 403


@pytest.mark.parametrize("method,path", ENDPOINTS[1:])
async def test_unknown_job_ids_are_404(jp_fetch, store, method, path):
    finished_job(store)
    code, body = await error_of(
        jp_fetch(API, path.format(id="0badc0de"), method=method, body=b"" if method == "POST" else None)
    )
    assert code == 404 and "no job '0badc0de'" in body["message"]


@pytest.mark.parametrize("job_id", ["..", "...", "jobs.db", "0badc0d", "0BADC0DE", "0badc0de0", "x" * 200])
async def test_what_is_not_a_job_id_is_refused_before_any_path_is_built(jp_fetch, store, job_id):
    code, body = await error_of(jp_fetch(API, "jobs", job_id, "log"))
    assert code == 400 and "is not a job id" in body["message"]


@pytest.mark.parametrize(
    "path",
    [
        "jobs/..%2F..%2Fsecret.txt/log",  # encoded slashes reach the handler as one id
        "jobs/%2E%2E%2Fsecret.txt/log",
        "jobs/..%252F..%252Fsecret.txt/log",  # double-encoded
        "jobs/../../secret.txt/log",  # plain dot segments
        "jobs/%2Fetc%2Fpasswd/log",
        "jobs/%00/log",
    ],
)
async def test_traversal_attempts_read_nothing_outside_the_jobs_root(
    http_server_client, jp_auth_header, jp_serverapp, jp_base_url, home, path
):
    (home / "secret.txt").write_text("the secret\n")
    with pytest.raises(HTTPClientError) as caught:
        await http_server_client.fetch(f"{jp_base_url}{API}/{path}", headers=jp_auth_header)
    response = caught.value.response
    assert 400 <= caught.value.code < 500
    assert response is None or b"the secret" not in response.body


async def test_job_list_pages_filters_and_carries_what_the_panel_draws(jp_fetch, store):
    first = finished_job(store, name="first", losses=[3.0 - i * 0.01 for i in range(300)])
    failed = finished_job(store, name="second", status="failed", message="exited with code 1: boom")
    newest = finished_job(store, name="third")

    page = await get_json(jp_fetch, "jobs")
    assert page["total"] == 3 and (page["limit"], page["offset"]) == (100, 0)
    assert [job["id"] for job in page["jobs"]] == [newest.id, failed.id, first.id]

    row = page["jobs"][2]
    assert row["display"]["name"] == "first" and row["display"]["progress"] == "30/30"
    assert row["display"]["cost"] == "$0.10" and row["cost_usd"] == pytest.approx(0.1)
    assert (row["step"], row["total_steps"], row["samples_per_second"]) == (30, 30, 50.0)
    assert row["elapsed_seconds"] == pytest.approx(100.0) and row["remaining_seconds"] is None
    # the whole run, thinned to a sparkline, ending at the last loss
    assert 24 <= len(row["loss_series"]) <= 49
    assert row["loss_series"][0] == 3.0 and row["loss_series"][-1] == pytest.approx(3.0 - 299 * 0.01)
    assert page["jobs"][0]["loss_series"] == [2.0, 1.5, 1.0]

    second_page = await get_json(jp_fetch, "jobs", limit="2", offset="2")
    assert [job["id"] for job in second_page["jobs"]] == [first.id] and second_page["total"] == 3

    failed_only = await get_json(jp_fetch, "jobs", status="failed,stopped")
    assert [job["id"] for job in failed_only["jobs"]] == [failed.id] and failed_only["total"] == 1
    assert failed_only["jobs"][0]["message"] == "exited with code 1: boom"


@pytest.mark.parametrize(
    "params,message",
    [
        ({"status": "done"}, "status 'done' is not a job status; use one of queued, running"),
        ({"limit": "0"}, "limit 0 is out of range; use from 1 to 1000"),
        ({"limit": "ten"}, "limit 'ten' is not a whole number"),
        ({"offset": "-1"}, "offset -1 is out of range; use 0 or more"),
    ],
)
async def test_bad_list_parameters_are_400_with_a_sentence(jp_fetch, store, params, message):
    code, body = await error_of(jp_fetch(API, "jobs", params=params))
    assert code == 400 and message in body["message"]


async def test_job_detail_has_stages_and_backend_facts(jp_fetch, store):
    job = finished_job(store, stages=[{"name": "train", "status": "succeeded", "exit_code": 0}], exit_code=0)
    detail = await get_json(jp_fetch, "jobs", job.id)
    assert detail["id"] == job.id and detail["status"] == "succeeded" and detail["exit_code"] == 0
    assert detail["stages"][0]["name"] == "train" and detail["info"] == {"hourly_price_usd": 3.6}


async def test_metrics_are_read_incrementally_and_a_torn_line_waits(jp_fetch, store):
    job = finished_job(store)
    first = await get_json(jp_fetch, "jobs", job.id, "metrics")
    assert [record["loss"] for record in first["records"]] == [2.0, 1.5, 1.0] and first["since"] == 0

    again = await get_json(jp_fetch, "jobs", job.id, "metrics", since=str(first["next"]))
    assert again["records"] == [] and again["next"] == first["next"]

    path = store.job_dir(job.id) / METRICS_FILE
    with open(path, "a") as metrics:
        metrics.write(json.dumps({"step": 40, "kind": "eval", "eval_loss": 0.9}) + "\n")
        metrics.write('{"step": 50, "kind": "tra')  # being written right now
    newer = await get_json(jp_fetch, "jobs", job.id, "metrics", since=str(first["next"]))
    assert newer["records"] == [{"step": 40, "kind": "eval", "eval_loss": 0.9}]

    with open(path, "a") as metrics:
        metrics.write('in", "loss": 0.8}\n')
    last = await get_json(jp_fetch, "jobs", job.id, "metrics", since=str(newer["next"]))
    assert last["records"] == [{"step": 50, "kind": "train", "loss": 0.8}] and last["next"] == path.stat().st_size


async def test_log_is_read_incrementally_bounded_and_as_a_tail(jp_fetch, store):
    job = finished_job(store, log="".join(f"line {i}\n" for i in range(1, 101)))
    first = await get_json(jp_fetch, "jobs", job.id, "log", limit="30")
    assert first["text"] == "line 1\nline 2\nline 3\nline 4\n" and first["next"] == len(first["text"])

    rest = await get_json(jp_fetch, "jobs", job.id, "log", offset=str(first["next"]))
    assert rest["text"].startswith("line 5\n") and rest["text"].endswith("line 100\n")
    assert rest["next"] == rest["size"]

    with open(store.job_dir(job.id) / LOG_FILE, "a") as log:
        log.write("line 101\n")
    newer = await get_json(jp_fetch, "jobs", job.id, "log", offset=str(rest["next"]))
    assert newer["text"] == "line 101\n"

    tail = await get_json(jp_fetch, "jobs", job.id, "log", offset="-20")
    assert tail["text"] == "line 100\nline 101\n" and tail["next"] == tail["size"]

    code, body = await error_of(jp_fetch(API, "jobs", job.id, "log", params={"limit": str(2 * 1024 * 1024)}))
    assert code == 400 and "limit 2097152 is out of range" in body["message"]


def wait_for(condition, timeout=60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := condition():
            return value
        time.sleep(0.1)
    raise AssertionError(f"condition not met within {timeout}s")


async def test_stop_ends_a_real_running_job_and_all_its_processes(jp_fetch, store):
    job = launch(
        {"task": "text-classification", "name": "sleepy", "script": {"path": str(SCRIPTS / "sleepy.py")}}, store=store
    )
    ready = wait_for(lambda: next((line for line in job.logs().splitlines() if line.startswith("ready pids")), None))
    pids = [int(pid) for pid in ready.split()[2:]]
    assert all(psutil.pid_exists(pid) for pid in pids)

    # a running job's log and metrics grow: each read returns only what came since the last
    log = await get_json(jp_fetch, "jobs", job.id, "log")
    wait_for(lambda: len([r for r in job.records() if r["kind"] == "train"]) >= 2)
    metrics = await get_json(jp_fetch, "jobs", job.id, "metrics")
    wait_for(lambda: len([r for r in job.records() if r["kind"] == "train"]) >= len(metrics["records"]) + 2)
    newer_metrics = await get_json(jp_fetch, "jobs", job.id, "metrics", since=str(metrics["next"]))
    assert newer_metrics["records"] and newer_metrics["status"] == "running"
    assert min(r["step"] for r in newer_metrics["records"]) > max(r["step"] for r in metrics["records"])
    newer_log = await get_json(jp_fetch, "jobs", job.id, "log", offset=str(log["next"]))
    assert newer_log["offset"] == log["next"] and newer_log["text"] and not log["text"].endswith(newer_log["text"])

    listed = await get_json(jp_fetch, "jobs", status="running")
    assert [row["id"] for row in listed["jobs"]] == [job.id]

    response = await jp_fetch(API, "jobs", job.id, "stop", method="POST", body=b"", request_timeout=60)
    stopped = json.loads(response.body)
    assert response.code == 200 and stopped["status"] == "stopped" and stopped["message"] == "stopped on request"
    assert not any(psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE for pid in pids)
    assert (await get_json(jp_fetch, "jobs", job.id))["status"] == "stopped"


async def test_one_bad_stored_loss_never_breaks_the_job_list(jp_fetch, store):
    from tests.test_store import store_bad_values

    bad_id = store_bad_values(store)
    page = await get_json(jp_fetch, "jobs")
    assert page["total"] == 2
    bad = next(job for job in page["jobs"] if job["id"] == bad_id)
    assert bad["loss"] is None and bad["display"]["loss"] == ""


async def test_the_log_tail_shows_an_unterminated_progress_bar(jp_fetch, store):
    bar = "".join(f"\r 10%|#         | {i}/100 [00:0{i % 10}<00:30,  3.51it/s]" for i in range(1, 30))
    job = finished_job(store, log="line 1\nline 2\n" + bar)
    tail = await get_json(jp_fetch, "jobs", job.id, "log", offset="-100")
    assert tail["text"].endswith("29/100 [00:09<00:30,  3.51it/s]") and tail["next"] == tail["size"]
    whole = await get_json(jp_fetch, "jobs", job.id, "log", offset=str(-len(bar) - 10))
    assert whole["text"].startswith("line 2\n")


async def test_a_slow_store_never_blocks_the_servers_event_loop(jp_fetch, jp_serverapp, store, monkeypatch):
    """GET work (SQLite, files, process scans) runs in threads: four slow listings overlap instead of queueing.

    Each listing waits until all four are inside the store at once (a barrier, not a clock: a loaded machine cannot
    make it pass or fail); listings that queued would leave the first waiting alone until the barrier breaks."""
    import asyncio
    import threading

    service = jp_serverapp.web_app.settings["nbtoolkit_jobs"]
    listing = service.store.list
    all_inside = threading.Barrier(4, timeout=30)

    def slow_list(*args, **kwargs):
        all_inside.wait()  # a store locked by a writer, a slow network home: held until the others arrive
        return listing(*args, **kwargs)

    monkeypatch.setattr(service.store, "list", slow_list)
    pages = await asyncio.gather(*(get_json(jp_fetch, "jobs") for _ in range(4)))
    assert all(page["total"] == 0 for page in pages) and not all_inside.broken


async def test_a_job_near_its_budget_carries_the_budget_sentence_and_a_bad_one_none(jp_fetch, store):
    warned = finished_job(store, name="near")
    store.set_info(
        warned.id,
        "budget",
        {"kind": "budget", "reached": "warning", "cost_usd": 0.092, "budget_usd": 0.1, "step": 40, "time": 1090.0},
    )
    broken = finished_job(store, name="broken")
    store.set_info(broken.id, "budget", {"reached": "warning"})  # no numbers: shown as no budget, the list stands
    shown = {job["name"]: job for job in (await get_json(jp_fetch, "jobs"))["jobs"]}
    assert shown["near"]["budget"]["summary"] == "$0.09 of the $0.10 budget spent (92%) at step 40"
    assert shown["near"]["budget"]["reached"] == "warning" and shown["broken"]["budget"] is None
    assert shown["near"]["projected_cost_usd"] is None  # ended: its cost is all there is


async def test_job_detail_shows_the_forecast_beside_what_was_measured_and_the_trackers(jp_fetch, store):
    """The panel's detail view reads the same lines `nbtoolkit show` prints."""
    job = finished_job(store, losses=(2.0, 1.5, 1.0, 0.8))
    store.set_info(
        job.id, "forecast", {"device_memory_gib": None, "samples_per_second": 40.0, "hours": None, "cost_usd": None}
    )
    directory = store.job_dir(job.id)
    (directory / "spec.json").write_text(
        json.dumps({"name": "tracked", "task": "text-classification", "report_to": ["tensorboard"]})
    )
    detail = await get_json(jp_fetch, "jobs", job.id)
    # steady pace leaves out the first window: 50 samples/s measured against 40 predicted
    assert detail["planned"][0].split() == ["steady", "samples/s", "predicted", "40.0", "measured", "50.0", "1.25x"]
    assert detail["tracking"][0].startswith("run name ") and detail["tracking"][1].startswith("tensorboard ")
    untracked = finished_job(store, name="plain")
    assert (await get_json(jp_fetch, "jobs", untracked.id))["tracking"] == []


async def test_job_detail_shows_where_its_model_came_from_and_its_last_lm_eval_comparison(jp_fetch, store):
    """The panel's detail view: the lineage `nbtoolkit show` prints, and the table `nbtoolkit eval` stored."""
    job = finished_job(store)
    store.set_info(job.id, "model_from", "0a1b2c3d")
    assert (await get_json(jp_fetch, "jobs", job.id))["harness"] is None
    row = {"task": "arc_easy", "metric": "acc", "base": None, "tuned": 0.625, "difference": None}
    row |= {"base_stderr": None, "tuned_stderr": 0.05}
    results = store.job_dir(job.id) / "eval" / "harness.json"
    results.parent.mkdir()
    missing = "base not evaluated: the base is the bundled tiny model, built with random weights inside the run"
    stored = {"tasks": ["arc_easy"], "limit": 200, "rows": [row], "commands": {}, "missing": missing}
    results.write_text(json.dumps(stored))
    detail = await get_json(jp_fetch, "jobs", job.id)  # a new comparison is a new detail (its etag changed)
    assert detail["model_from"] == "0a1b2c3d" and detail["harness"]["rows"] == [row]
    # how many examples, and why a base is missing, travel with the numbers
    assert detail["harness"]["limit"] == 200
    assert detail["harness"]["note"] == f"on the first 200 examples of each task; {missing}"
