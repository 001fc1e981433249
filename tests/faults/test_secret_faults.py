"""What a job does with the secrets it was given: a script that quotes its token as it fails (argparse does)
leaves the token in no file of the store and not in the job's message."""

from __future__ import annotations

import os
import signal
import time

import psutil

from nbtoolkit.api import launch
from nbtoolkit.runner.tree import WATCHER_MODULE
from tests.faults.jobs import PACED, submit_paced, wait_for
from tests.test_secrets import SECRET, files_holding


def test_a_script_that_quotes_its_token_as_it_fails(store, monkeypatch, observe):
    monkeypatch.setenv("HF_TOKEN", SECRET)
    job = submit_paced(store, "--echo-token", "$HF_TOKEN", "--hf-token", "$HF_TOKEN", steps=3)
    status = job.wait(timeout=60)
    ended = time.monotonic()
    message = job.record.message or ""
    truth = (
        status == "failed"
        and "unrecognized arguments: --hf-token ***" in message
        and files_holding(SECRET, store.home) == []
    )
    observe(job, "a script that quotes its token as it fails", truth, ended)


def test_a_lost_jobs_rank_logs_are_scrubbed_by_its_watcher(store, monkeypatch, observe):
    """kill -9 of the supervisor: the token its ranks printed into torchrun's per-rank logs was left there."""
    monkeypatch.setenv("HF_TOKEN", SECRET)
    args = ["--steps", "1000", "--pace", "0.5", "--echo-token", "$HF_TOKEN"]
    job = launch(
        {"task": "text-classification", "hardware": {"devices": 2}, "script": {"path": str(PACED), "args": args}},
        store=store,
    )
    wait_for(lambda: "token seen" in job.logs() and list(job.dir.glob("logs/*/attempt_0/*/stdout.log")), timeout=120)
    watcher = next(
        p for p in psutil.process_iter(["cmdline"]) if [WATCHER_MODULE, job.id] == (p.info["cmdline"] or [])[2:4]
    )
    os.kill(job.record.supervisor_pid, signal.SIGKILL)
    killed = time.monotonic()
    watcher.wait(timeout=30)
    truth = job.record.status == "lost" and files_holding(SECRET, store.home) == []
    observe(job, "kill -9 of the supervisor of a job whose ranks printed its token", truth, killed)
