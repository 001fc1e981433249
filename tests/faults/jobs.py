"""Jobs for the fault tests: a paced stand-in (tests/scripts/paced.py) and the checks of what it printed."""

from __future__ import annotations

import re
import time

from nbtoolkit.api import Job
from nbtoolkit.launching.launch import Launch, Stage
from nbtoolkit.runner import submit
from tests.conftest import PYTHON, SCRIPTS

PACED = SCRIPTS / "paced.py"
STEP_LINE = re.compile(r"^\[nbtoolkit\] step (\d+)/\d+$", re.MULTILINE)


def paced_launch(*options: str, steps: int = 10, pace: float = 0.2) -> Launch:
    argv = [PYTHON, str(PACED), "--steps", str(steps), "--pace", str(pace), *options]
    return Launch(backend="local", stages=[Stage("train", argv, metrics_from_log="--own-metrics" not in options)])


def submit_paced(store, *options: str, steps: int = 10, pace: float = 0.2) -> Job:
    record = submit(
        paced_launch(*options, steps=steps, pace=pace), name="paced", task="text-classification", store=store
    )
    return Job(record.id, store)


def wait_for(condition, timeout: float = 60.0, poll: float = 0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(poll)
    raise AssertionError(f"condition not met within {timeout}s")


def printed_steps(job: Job) -> list[int]:
    """The steps the program printed to its log (what it really did, read without nbtoolkit's parser)."""
    return [int(step) for step in STEP_LINE.findall(job.logs())]


def finished_all(job: Job, steps: int) -> bool:
    """The program ran to its end, and every step it printed came through as a metric record."""
    printed = printed_steps(job)
    recorded = [record["step"] for record in job.records() if record.get("kind") == "train"]
    return "\ndone\n" in job.logs() and printed == list(range(1, steps + 1)) and recorded == printed
