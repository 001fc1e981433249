"""Soak: jobs started, stopped and resumed at random for minutes, watched the way users watch them.

Five real training jobs at a time (the tiny bundled model on CPU, checkpoints every 20 steps)
in one fresh store; a real Jupyter server with the nbtoolkit extension, polled every second as
the sidebar panel does (job list, each running job's metrics and log tail); three followers
reading the charts' data as a live chart does (`charts.JobSource`, without drawing: threads of
this process standing in for three kernels); every 5-20 s a random running job is stopped
(POST .../stop, as the panel's button) and later resumed from its last checkpoint (or a new job
takes its place). A job that ends is replaced. At the end every job is stopped and the machine
is searched for processes of the store's jobs.

Counts: "database is locked" anywhere (server log, job logs, supervisor logs, this process),
errors in the server log, HTTP answers other than 200, stops whose final status was not true,
jobs lost, orphan processes. Every count should be 0.

    .venv/bin/python benchmarks/soak.py [--minutes 10] [--jobs 5] [--followers 3]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import re
import secrets
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

from list_endpoint import free_port, start_server

from nbtoolkit.api import Job, launch, resume
from nbtoolkit.backends import LaunchError
from nbtoolkit.notebook.charts import POLL_S, JobSource
from nbtoolkit.runner import JobStore
from nbtoolkit.runner.store import ACTIVE

LOCKED = "database is locked"
SPEC = {
    "task": "text-classification",
    "train": {"max_steps": 400, "batch_size": 8, "logging_steps": 5, "save_steps": 20, "learning_rate": 0.003},
}


class Tally:
    """Thread-safe counters, and the first few examples of each."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.examples: dict[str, list[str]] = {}
        self.lock = threading.Lock()

    def add(self, key: str, example: str = "", n: int = 1) -> None:
        with self.lock:
            self.counts[key] += n
            if n and example and len(self.examples.setdefault(key, [])) < 3:
                self.examples[key].append(example[:300])


def poll_server(port: int, token: str, stop: threading.Event, tally: Tally) -> None:
    """The sidebar panel: every second the list, then each running job's new metrics and log tail."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    cursors: dict[str, int] = {}

    def get(path: str) -> dict | None:
        connection.request("GET", path, headers={"Authorization": f"token {token}"})
        response = connection.getresponse()
        body = response.read()
        tally.add("requests")
        if response.status != 200:
            tally.add("http errors", f"{path}: {response.status} {body[:200]!r}")
            return None
        return json.loads(body)

    while not stop.wait(1.0):
        try:
            listing = get("/nbtoolkit/api/jobs")
            for job in (listing or {}).get("jobs", []):
                if job["status"] in ACTIVE:
                    page = get(f"/nbtoolkit/api/jobs/{job['id']}/metrics?since={cursors.get(job['id'], 0)}")
                    if page:
                        cursors[job["id"]] = page["next"]
                    get(f"/nbtoolkit/api/jobs/{job['id']}/log?offset=-4096")
        except Exception as exc:
            tally.add("poller exceptions", repr(exc))
            connection.close()
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)


def follow_charts(store: JobStore, stop: threading.Event, tally: Tally, seed: int) -> None:
    """A kernel with a live chart: follows one running job's data until it ends, then another."""
    rng = random.Random(seed)
    while not stop.is_set():
        try:
            running = store.list(["running"])
            if not running:
                stop.wait(1.0)
                continue
            source = JobSource(Job(rng.choice(running).id, store))
            while not stop.is_set():
                state = source.state()
                tally.add("chart records", n=len(source.read_new()))
                if state.finished:
                    break
                stop.wait(POLL_S)
        except Exception as exc:
            tally.add("follower exceptions", repr(exc))
            stop.wait(1.0)


def stop_over_rest(port: int, token: str, job_id: str) -> dict:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    connection.request("POST", f"/nbtoolkit/api/jobs/{job_id}/stop", headers={"Authorization": f"token {token}"})
    response = connection.getresponse()
    body = response.read()
    if response.status != 200:
        raise RuntimeError(f"POST stop {job_id}: {response.status} {body[:200]!r}")
    return json.loads(body)


def job_pids(store: JobStore, job_ids: set[str]) -> list[int]:
    """Processes of these jobs still alive, found through /proc (their id in the environment)."""
    tags = {f"NBTOOLKIT_JOB_ID={job_id}".encode() for job_id in job_ids}
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                continue
            if tags & set((entry / "environ").read_bytes().split(b"\0")):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--jobs", type=int, default=5, help="jobs running at a time")
    parser.add_argument("--followers", type=int, default=3, help="live charts following jobs")
    parser.add_argument("--seed", type=int, default=13)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    tally = Tally()
    os.environ.setdefault("OMP_NUM_THREADS", "1")

    with tempfile.TemporaryDirectory(prefix="nbtoolkit-soak-") as tmp:
        home, root = Path(tmp) / "home", Path(tmp) / "root"
        root.mkdir()
        os.environ["NBTOOLKIT_HOME"] = str(home)
        store = JobStore(home)
        port, token = free_port(), secrets.token_hex(8)
        server_log = Path(tmp) / "server.log"
        server = start_server(home, root, port, token, log=server_log)
        stop = threading.Event()
        threads = [threading.Thread(target=poll_server, args=(port, token, stop, tally), daemon=True)]
        threads += [
            threading.Thread(target=follow_charts, args=(store, stop, tally, args.seed + n), daemon=True)
            for n in range(args.followers)
        ]
        for thread in threads:
            thread.start()
        started, deadline = time.monotonic(), time.monotonic() + args.minutes * 60
        ours: set[str] = set()
        stopped_ones: list[str] = []
        next_stop = time.monotonic() + rng.uniform(5, 20)
        print(
            f"soak: {args.jobs} jobs, {args.followers} followers, server polled every 1 s, for {args.minutes} "
            f"min; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores",
            flush=True,
        )
        try:
            while time.monotonic() < deadline:
                active = [record for record in store.list(ACTIVE) if record.id in ours]
                for _ in range(args.jobs - len(active)):
                    job = None
                    if stopped_ones and rng.random() < 0.7:
                        old = stopped_ones.pop(rng.randrange(len(stopped_ones)))
                        try:
                            job = resume(old, store=store)
                            tally.add("resumed")
                        except LaunchError as exc:  # no checkpoint yet: a new job takes its place
                            tally.add("not resumable", str(exc))
                    job = job or launch(SPEC, store=store)
                    ours.add(job.id)
                    tally.add("jobs started")
                if time.monotonic() >= next_stop and active:
                    victim = rng.choice(active)
                    detail = stop_over_rest(port, token, victim.id)
                    tally.add("stops")
                    if detail["status"] not in ("stopped", "succeeded"):
                        tally.add("stops with a wrong status", f"{victim.id}: {detail['status']}")
                    stopped_ones.append(victim.id)
                    next_stop = time.monotonic() + rng.uniform(5, 20)
                time.sleep(1.0)
        finally:
            stop.set()
            for record in store.list(ACTIVE):
                stop_over_rest(port, token, record.id)
            finish = time.monotonic()
            time.sleep(10.0)  # every process of a job is gone within 10 s of its stop
            orphans = job_pids(store, ours)
            server.terminate()
            server.wait(timeout=30)
        elapsed = (finish - started) / 60
        statuses = Counter(record.status for record in store.list(limit=10000) if record.id in ours)
        text = server_log.read_text(errors="replace")
        for directory in store.jobs_root.iterdir():
            for name in ("output.log", "supervisor.log"):
                path = directory / name
                if path.exists():
                    locked = path.read_text(errors="replace").count(LOCKED)
                    if locked:
                        tally.add(LOCKED, f"{path}", locked)
        tally.add(LOCKED, "server log", text.count(LOCKED))
        server_errors = [line for line in text.splitlines() if re.match(r"^\[E ", line) or "Traceback" in line]
        for line in server_errors:
            tally.add("server log errors", line)
        tally.add("orphan processes", " ".join(map(str, orphans)), len(orphans))
        tally.add("jobs lost", n=statuses.get("lost", 0))
        for key in ("poller exceptions", "follower exceptions"):
            locked = sum(LOCKED in example for example in tally.examples.get(key, []))
            tally.add(LOCKED, key, locked)

    counts = tally.counts
    print(
        f"ran {elapsed:.1f} min: {counts['jobs started']} jobs started ({counts['resumed']} resumed), "
        f"{counts['stops']} stopped over REST, final statuses {dict(statuses)}; {counts['requests']} REST "
        f"requests, {counts['chart records']} records read by followers; load average {os.getloadavg()[0]:.1f}"
    )
    defects = [
        "database is locked",
        "server log errors",
        "http errors",
        "poller exceptions",
        "follower exceptions",
        "stops with a wrong status",
        "jobs lost",
        "orphan processes",
    ]
    print("; ".join(f"{key} {counts[key]}" for key in defects))
    for key in defects:
        for example in tally.examples.get(key, []):
            print(f"  {key}: {example}")
    return 0 if not any(counts[key] for key in defects) else 1


if __name__ == "__main__":
    sys.exit(main())
