"""What the machine does to a job's files and store: a full disk, a store locked past its busy timeout,
a stop racing the job's end, a stop from another host's view of a shared store, odd metric values."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import time

import pytest

from nbtoolkit.runner import JobStore
from tests.conftest import PYTHON
from tests.faults.conftest import job_pids
from tests.faults.jobs import finished_all, printed_steps, submit_paced, wait_for


def fill(path) -> int:
    """Write to `path` until the disk is full; returns the bytes written."""
    written = 0
    with open(path, "wb", buffering=0) as handle:
        try:
            while True:
                written += handle.write(b"\0" * 65536)
        except OSError:
            pass
        try:
            while True:
                written += handle.write(b"\0" * 512)
        except OSError:
            return written


STEPS_ON_SMALL_DISK = 120


@pytest.fixture
def small_disk(tmp_path):
    """A 16 MiB tmpfs (root only): a disk that fills up for real."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    mount = tmp_path / "small"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(mount)], check=True)
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


def test_the_disk_filling_up(small_disk, monkeypatch, observe):
    monkeypatch.setenv("NBTOOLKIT_HOME", str(small_disk / "home"))
    store = JobStore(small_disk / "home")
    job = submit_paced(store, steps=STEPS_ON_SMALL_DISK, pace=0.05)
    wait_for(lambda: printed_steps(job))
    filler = small_disk / "filler"
    assert fill(filler) > 0
    time.sleep(3.0)  # ~60 steps of log lines: more than the pages the log has left
    filler.unlink()
    status = job.wait(timeout=60)
    ended = time.monotonic()
    record = job.record
    # the truth either way: it finished every step, or it failed and says the disk is full
    truth = (status == "succeeded" and finished_all(job, STEPS_ON_SMALL_DISK)) or (
        status == "failed" and "is full" in (record.message or "")
    )
    observe(job, "the disk filling up", truth, ended)


def test_the_store_locked_longer_than_the_busy_timeout(store, monkeypatch, observe):
    monkeypatch.setenv("NBTOOLKIT_BUSY_TIMEOUT_S", "0.2")
    job = submit_paced(store, steps=20, pace=0.15)
    wait_for(lambda: printed_steps(job))
    writer = sqlite3.connect(store.db_path, isolation_level=None)
    writer.execute("BEGIN EXCLUSIVE")  # another writer holds the store: the job ends meanwhile
    wait_for(lambda: "\ndone\n" in job.logs(), timeout=30)
    time.sleep(2.0)
    assert job.record.status == "running"  # the end is not recorded yet: the store is still locked
    writer.execute("COMMIT")
    writer.close()
    status = job.wait(timeout=30)
    ended = time.monotonic()
    assert "database is locked" in job.logs()  # the supervisor met the lock and rode it out
    observe(job, "store locked past the busy timeout", status == "succeeded" and finished_all(job, 20), ended)


@pytest.mark.parametrize("when", ["one step before the end", "at the last step", "after the program's end"])
def test_a_stop_racing_the_jobs_own_end(store, observe, when):
    steps = 8
    job = submit_paced(store, steps=steps, pace=0.15)
    if when == "one step before the end":
        wait_for(lambda: steps - 1 in printed_steps(job), poll=0.01)
    elif when == "at the last step":
        wait_for(lambda: steps in printed_steps(job), poll=0.01)
    else:
        wait_for(lambda: "\ndone\n" in job.logs(), poll=0.01)
    status = job.stop()
    stopped = time.monotonic()
    # the truth: a program that got to its end (and exited 0) succeeded; one cut short was stopped
    truth = status == ("succeeded" if finished_all(job, steps) and job.record.exit_code == 0 else "stopped")
    observe(job, f"a stop racing the job's end ({when})", truth, stopped)


def test_a_stop_from_a_second_hosts_view_of_the_store(store, monkeypatch, observe):
    monkeypatch.setenv("NBTOOLKIT_HOST", "node-a")  # the job (and its supervisor) run on node-a
    job = submit_paced(store, "--child", steps=1000, pace=0.2)
    wait_for(lambda: "child " in job.logs() and printed_steps(job))
    assert job.record.host == "node-a" and len(job_pids(job.id, job.dir)) >= 3
    node_b = {**os.environ, "NBTOOLKIT_HOST": "node-b"}  # the same store, seen from node-b: no signals from here
    stopper = subprocess.run(
        [PYTHON, "-m", "nbtoolkit.cli", "stop", job.id], env=node_b, capture_output=True, text=True, timeout=60
    )
    stopped = time.monotonic()
    assert stopper.stdout.strip() == f"job {job.id} stopped", stopper.stdout + stopper.stderr
    record = job.record
    truth = record.status == "stopped" and record.stop_requested is not None and "stop requested" in job.logs()
    observe(job, "a stop from a second host's view", truth, stopped)


def test_odd_values_in_a_user_scripts_own_metrics(store, observe):
    job = submit_paced(store, "--own-metrics", steps=12, pace=0.05)
    status = job.wait(timeout=60)
    ended = time.monotonic()
    records = job.records()
    notes = [line for line in job.logs().splitlines() if "values that are not numbers are left out" in line]
    truth = (
        status == "succeeded"
        and "\ndone\n" in job.logs()
        and len(records) == 12
        and len(notes) == 3
        and all(isinstance(record.get("loss", 0.0), float) for record in records)
    )
    observe(job, "odd values in the script's own metrics.jsonl", truth, ended)
