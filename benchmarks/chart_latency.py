"""Metric-to-chart latency: from a record landing in metrics.jsonl to the chart image that shows it.

A writer appends train records to a job's metrics.jsonl at a fixed cadence; the chart publishes
each redraw (the moment it would go to the notebook) and we time, per record, the gap between
its write and the first published image that includes it. Two cadences: a record every 5 s
(a usual logging interval) and one every 0.5 s, faster than the chart redraws (at most once a
second, and no more often than its CPU budget allows), where records wait for the next redraw.

    .venv/bin/python benchmarks/chart_latency.py [--records 20]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time

import psutil

from nbtoolkit.api import Job
from nbtoolkit.notebook.charts import JobSource, LiveChart
from nbtoolkit.runner import JobStore


class TimedChart(LiveChart):
    """A LiveChart that notes when each image is published and how many records it holds."""

    def __init__(self, *args, **kwargs) -> None:
        self.published: list[tuple[float, int]] = []
        super().__init__(*args, **kwargs)

    def _publish(self, bundle: dict[str, str]) -> None:
        super()._publish(bundle)
        self.published.append((time.time(), len(self.records)))


def running_job(store: JobStore) -> Job:
    """A job row that stays running (its 'supervisor' is this process) until we end it."""
    record = store.create(name="latency", task="text-classification", backend="local")
    me = psutil.Process()
    store.update(
        record.id, status="running", started=time.time(), supervisor_pid=me.pid, supervisor_started=me.create_time()
    )
    return Job(record.id, store)


def measure(store: JobStore, records: int, period: float) -> list[float]:
    job = running_job(store)
    chart = TimedChart(JobSource(job), show=False)
    written: list[float] = []
    path = job.dir / "metrics.jsonl"
    for step in range(1, records + 1):
        line = {
            "time": time.time(),
            "step": step,
            "kind": "train",
            "max_steps": records,
            "loss": 1 / step,
            "learning_rate": 1e-3,
            "samples_per_second": 100.0,
            "window_seconds": period,
        }
        with open(path, "a") as handle:
            handle.write(json.dumps(line) + "\n")
        written.append(time.time())
        time.sleep(period)
    time.sleep(2.0)
    store.update(job.id, status="succeeded", ended=time.time())
    chart.wait(timeout=60)
    latencies = []
    for index, at in enumerate(written):
        shown = next(when for when, count in chart.published if count > index)
        latencies.append(shown - at)
    return latencies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=20)
    args = parser.parse_args()
    store = JobStore(tempfile.mkdtemp(prefix="nbtoolkit-bench-"))
    for period in (5.0, 0.5):
        latencies = sorted(measure(store, args.records, period))
        p95 = latencies[min(len(latencies) - 1, round(0.95 * (len(latencies) - 1)))]
        print(
            f"a record every {period:.1f} s: latency median {statistics.median(latencies):.2f} s, "
            f"p95 {p95:.2f} s, max {latencies[-1]:.2f} s ({len(latencies)} records; the first includes "
            "importing matplotlib)",
            flush=True,
        )


if __name__ == "__main__":
    main()
