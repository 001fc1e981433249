"""How long from `launch()` returning to the job's first log line, and to its first metric.

    python benchmarks/submit_latency.py [--runs 5]

Prints medians: submit call, submit -> first output.log byte (the supervisor is up and the
stage started), submit -> first line from the program itself, submit -> first train metric.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ["NBTOOLKIT_HOME"] = tempfile.mkdtemp(prefix="nbtoolkit-bench-")

from nbtoolkit.api import launch

SPEC = {"task": "text-classification", "train": {"max_steps": 20, "logging_steps": 5}}


def until(condition, poll=0.005):
    while not condition():
        time.sleep(poll)
    return time.perf_counter()


def one_run() -> dict[str, float]:
    start = time.perf_counter()
    job = launch(SPEC)
    submitted = time.perf_counter()
    log = job.dir / "output.log"
    first_byte = until(lambda: log.stat().st_size > 0)
    first_program_line = until(
        lambda: any(
            not line.startswith("[nbtoolkit] ") or " | model " in line for line in log.read_text().splitlines()[1:]
        )
    )
    first_metric = until(lambda: any(r["kind"] == "train" for r in job.records()))
    job.wait()
    return {
        "submit call": submitted - start,
        "first log byte": first_byte - start,
        "first program line": first_program_line - start,
        "first train metric": first_metric - start,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    runs = [one_run() for _ in range(parser.parse_args().runs)]
    for key in runs[0]:
        print(
            f"{key:>20}: median {statistics.median(run[key] for run in runs):.3f}s "
            f"(min {min(run[key] for run in runs):.3f}s, max {max(run[key] for run in runs):.3f}s)"
        )


if __name__ == "__main__":
    main()
