"""The Python API: `launch(spec) -> Job`, `jobs()`, and the Job handle notebooks and scripts hold."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

from nbtoolkit import backends
from nbtoolkit import jobs as job_control
from nbtoolkit.jobs.store import JobRecord, JobStore
from nbtoolkit.metrics.series import read_metrics
from nbtoolkit.spec import RunSpec, load_spec


class Job:
    """A handle on one job. Cheap to create; every property reads the store afresh."""

    def __init__(self, job_id: str, store: JobStore | None = None) -> None:
        self.store = store or JobStore()
        self.id = self.store.get(job_id).id

    @property
    def record(self) -> JobRecord:
        return self.store.get(self.id)

    @property
    def status(self) -> str:
        return self.record.status

    @property
    def dir(self) -> Path:
        return self.store.job_dir(self.id)

    @property
    def spec(self) -> RunSpec:
        return load_spec(self.dir / "spec.json")

    def wait(self, timeout: float | None = None) -> str:
        """Block until the job ends (or `timeout` seconds pass); returns the status."""
        return job_control.wait(self.id, store=self.store, timeout=timeout).status

    def logs(self, tail: int | None = None) -> str:
        text, _ = job_control.read_log(self.id, store=self.store)
        return "\n".join(text.splitlines()[-tail:]) if tail else text

    def records(self) -> list[dict[str, Any]]:
        """The job's metric records as written (one dict per metrics.jsonl line)."""
        return read_metrics(self.dir)

    def metrics(self):
        """The job's metrics as a pandas DataFrame, one row per record."""
        import pandas as pd

        return pd.DataFrame(self.records())

    def stop(self) -> str:
        return job_control.stop(self.id, store=self.store).status

    def chart(self, *, log_scale: bool = False):
        """Show the job's live chart (loss, learning rate, throughput, progress), redrawn until it ends."""
        from nbtoolkit.notebook.charts import live_chart

        return live_chart(self, log_scale=log_scale)

    def _ipython_display_(self) -> None:
        """In a notebook, a job shows itself as its live chart."""
        self.chart()

    def __repr__(self) -> str:
        record = self.record
        return f"<Job {record.id} {record.name!r} {record.backend} {record.status}>"


def launch(spec: RunSpec | dict | str | Path, *, store: JobStore | None = None, force: bool = False) -> Job:
    """Check the spec, render its launch, and start it as a job that outlives this process.

    A spec the planner is sure will not fit in device (or host) memory is refused with a
    LaunchError unless `force=True` (then it only warns).
    """
    spec = load_spec(spec)
    check_fit(spec, force=force)
    backends.preflight(spec)
    launch_ = backends.render(spec)
    store = store or JobStore()
    info = {"hourly_price_usd": spec.hardware.hourly_price_usd}
    record = job_control.submit(launch_, name=spec.display_name, task=spec.task, store=store, info=info)
    return Job(record.id, store)


def check_fit(spec: RunSpec, *, force: bool = False) -> None:
    """Refuse (or, forced, warn about) a launch the planner predicts will run out of memory.

    CPU runs on this machine are not checked; the planner is imported only for the others.
    """
    if spec.hardware.target == "local" and spec.hardware.accelerator == "cpu":
        return
    from nbtoolkit.planner import fit_problem

    problem = fit_problem(spec)
    if problem is None:
        return
    if not force:
        raise backends.LaunchError(problem)
    warnings.warn(problem, stacklevel=3)


def jobs(status: str | None = None, limit: int = 100, store: JobStore | None = None) -> list[Job]:
    """Known jobs, newest first."""
    store = store or JobStore()
    return [Job(record.id, store) for record in store.list([status] if status else None, limit=limit)]
