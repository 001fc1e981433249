"""Monitoring overhead: the same tiny job with and without a live chart following it.

Runs are alternated (plain, charted, plain, charted, ...) in one fresh job store so machine load
drifts evenly over both; each run's speed is its steady-state samples/s from its own metrics.
The chart is drawn in this process, as it would be in the kernel (rendered to PNG each redraw;
only the hand-off to a notebook frontend is missing). Target: charted >= 0.98 of plain.

    .venv/bin/python benchmarks/monitoring_overhead.py [--pairs 3] [--steps 150]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile

from nbtoolkit.api import launch
from nbtoolkit.jobs import JobStore
from nbtoolkit.metrics.throughput import steady_state
from nbtoolkit.notebook.charts import live_chart


def tiny_spec(steps: int) -> dict:
    return {"task": "text-classification", "dataset": {"eval_split": None},
            "train": {"max_steps": steps, "batch_size": 16, "learning_rate": 0.003, "logging_steps": 5}}


def run_once(spec: dict, store: JobStore, charted: bool) -> tuple[float, int]:
    job = launch(spec, store=store)
    chart = live_chart(job, show=False) if charted else None
    status = job.wait()
    if status != "succeeded":
        raise SystemExit(f"job {job.id} {status}: {job.record.message}")
    redraws = 0
    if chart is not None:
        chart.wait(timeout=60)
        redraws = chart.redraws
    return steady_state(job.records()).samples_per_second, redraws


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--steps", type=int, default=150)
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    store = JobStore(tempfile.mkdtemp(prefix="nbtoolkit-bench-"))
    spec = tiny_spec(args.steps)
    plain, charted = [], []
    for pair in range(args.pairs):
        speed, _ = run_once(spec, store, charted=False)
        plain.append(speed)
        speed_charted, redraws = run_once(spec, store, charted=True)
        charted.append(speed_charted)
        print(f"pair {pair + 1}: plain {speed:7.1f} samples/s | charted {speed_charted:7.1f} samples/s "
              f"({redraws} redraws) | ratio {speed_charted / speed:.3f}", flush=True)
    ratio = statistics.mean(charted) / statistics.mean(plain)
    print(f"mean: plain {statistics.mean(plain):.1f}, charted {statistics.mean(charted):.1f} samples/s; "
          f"charted / plain = {ratio:.3f} (target >= 0.98); pair ratios median "
          f"{statistics.median(c / p for c, p in zip(charted, plain)):.3f}")


if __name__ == "__main__":
    main()
