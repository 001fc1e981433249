"""The fault suite's checks: what each test observed after injecting its fault (see ledger.py for the totals).

Each test injects one fault into a real job and hands the job to `observe`, which checks, by
its own means (not nbtoolkit's): the final status against what really happened, that no
process carrying the job (its id in the environment, its folder as working directory or on the
command line) outlives it by more than 10 s, and that every record in metrics.jsonl comes back
from the reader once.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from pathlib import Path

import pytest

from tests.faults.ledger import Observation, record

#: every process of a job is gone this long after the job ended or was stopped
ORPHAN_DEADLINE_S = 10.0


def job_pids(job_id: str, job_dir: Path) -> list[int]:
    """Live processes of this job, found through /proc: its id in the environment, its folder as cwd or argument."""
    tag, folder = f"NBTOOLKIT_JOB_ID={job_id}".encode(), str(job_dir)
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                continue
            environ = (entry / "environ").read_bytes().split(b"\0")
            cmdline = (entry / "cmdline").read_bytes().decode(errors="replace")
            cwd = os.readlink(entry / "cwd")
        except OSError:
            continue
        if tag in environ or cwd == folder or folder in cmdline:
            found.append(int(entry.name))
    return found


def count_orphans(job_id: str, job_dir: Path, since: float) -> int:
    """Processes of the job still alive ORPHAN_DEADLINE_S after `since` (they are killed, so tests stay clean)."""
    while time.monotonic() < since + ORPHAN_DEADLINE_S and job_pids(job_id, job_dir):
        time.sleep(0.2)
    left = job_pids(job_id, job_dir)
    for pid in left:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    return len(left)


def metric_differences(job_dir: Path, returned: list[dict]) -> tuple[int, int]:
    """(lost, duplicated): records of whole lines in metrics.jsonl against those the reader returned."""
    lines = (job_dir / "metrics.jsonl").read_bytes().split(b"\n")[:-1]  # the text after the last newline is torn
    written = []
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict):
            written.append((record.get("time"), record.get("kind")))
    got = [(record.get("time"), record.get("kind")) for record in returned]
    lost = sum(max(0, written.count(key) - got.count(key)) for key in set(written))
    duplicated = sum(max(0, got.count(key) - written.count(key)) for key in set(got))
    return lost, duplicated


@pytest.fixture
def observe(request):
    """observe(job, fault, status_true, since): record what the test saw; fails the test on any defect."""

    def check(job, fault: str, status_true: bool, since: float) -> Observation:
        orphans = count_orphans(job.id, job.dir, since)
        lost, duplicated = metric_differences(job.dir, job.records())
        observation = Observation(request.node.name, fault, job.status, status_true, orphans, lost, duplicated)
        record(observation)
        assert status_true, f"{fault}: final status {job.status!r} is not what happened\n{job.logs(tail=30)}"
        assert orphans == 0, f"{fault}: {orphans} processes of job {job.id} outlived it by {ORPHAN_DEADLINE_S} s"
        assert (lost, duplicated) == (0, 0), f"{fault}: metric records lost {lost}, duplicated {duplicated}"
        return observation

    return check
