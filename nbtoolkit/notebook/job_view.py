"""How a job shows itself as a cell's value: its live chart, and when it succeeded, a Try it box below."""

from __future__ import annotations

from IPython.display import display


def show_job(job) -> None:
    job.chart()
    if job.status == "succeeded":
        display(job.try_it())
