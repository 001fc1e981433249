"""Monitoring overhead: the same tiny job with and without a live chart following it.

Runs alternate in ABBA order (plain, charted, charted, plain, ...) in one fresh job store so
machine load drifts evenly over both; each run's speed is its steady-state samples/s from its
own metrics. The chart is drawn in this process, as it would be in the kernel (rendered to PNG
each redraw; only the hand-off to a notebook frontend is missing). Target: charted >= 0.98 of
plain. On a shared machine that ratio is noisy, so the chart's own CPU use is printed too: the
follower thread's CPU seconds per second of the job, the most it can take from the run.

    .venv/bin/python benchmarks/monitoring_overhead.py [--pairs 3] [--steps 150]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

from nbtoolkit.api import launch
from nbtoolkit.jobs import JobStore
from nbtoolkit.metrics.throughput import steady_state
from nbtoolkit.notebook.charts import JobSource, LiveChart


class MeteredChart(LiveChart):
    """A LiveChart that measures the CPU time of its follower thread."""

    cpu_seconds = 0.0

    def _follow(self) -> None:
        started = time.thread_time()
        try:
            super()._follow()
        finally:
            self.cpu_seconds = time.thread_time() - started


def tiny_spec(steps: int) -> dict:
    return {"task": "text-classification", "dataset": {"eval_split": None},
            "train": {"max_steps": steps, "batch_size": 16, "learning_rate": 0.003, "logging_steps": 5}}


def run_once(spec: dict, store: JobStore, charted: bool) -> tuple[float, MeteredChart | None, float]:
    """Steady samples/s of one run, its chart (if charted), and the job's wall time."""
    job = launch(spec, store=store)
    chart = MeteredChart(JobSource(job), show=False) if charted else None
    status = job.wait()
    if status != "succeeded":
        raise SystemExit(f"job {job.id} {status}: {job.record.message}")
    if chart is not None:
        chart.wait(timeout=60)
    return steady_state(job.records()).samples_per_second, chart, job.record.elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--steps", type=int, default=150)
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    store = JobStore(tempfile.mkdtemp(prefix="nbtoolkit-bench-"))
    spec = tiny_spec(args.steps)
    plain, charted, shares = [], [], []
    for pair in range(args.pairs):
        order = (False, True) if pair % 2 == 0 else (True, False)
        runs = {is_charted: run_once(spec, store, charted=is_charted) for is_charted in order}
        (speed, _, _), (speed_charted, chart, elapsed) = runs[False], runs[True]
        plain.append(speed)
        charted.append(speed_charted)
        shares.append(chart.cpu_seconds / elapsed)
        print(f"pair {pair + 1}: plain {speed:7.1f} samples/s | charted {speed_charted:7.1f} samples/s "
              f"({chart.redraws} redraws, chart CPU {chart.cpu_seconds:.1f} s in {elapsed:.0f} s) | "
              f"ratio {speed_charted / speed:.3f}", flush=True)
    ratio = statistics.mean(charted) / statistics.mean(plain)
    print(f"mean: plain {statistics.mean(plain):.1f}, charted {statistics.mean(charted):.1f} samples/s; "
          f"charted / plain = {ratio:.3f} (target >= 0.98); pair ratios median "
          f"{statistics.median(c / p for c, p in zip(charted, plain)):.3f}; the chart used "
          f"{100 * statistics.mean(shares):.1f}% of one core while following (of {os.cpu_count()} cores)")


if __name__ == "__main__":
    main()
