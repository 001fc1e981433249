"""The REST API's response bodies (pydantic): what the sidebar panel reads. openapi.yaml documents them."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from nbtoolkit.jobs.listing import cost_usd, listing_row, projected_cost_usd, remaining_seconds
from nbtoolkit.jobs.store import JobRecord
from nbtoolkit.metrics import budget


class JobSummary(BaseModel):
    """One row of the job list: the listing's strings for people plus the raw numbers a panel draws."""

    id: str
    name: str
    task: str
    backend: str
    status: str
    stage: str | None
    display: dict[str, str] = Field(description="the columns `nbtoolkit jobs` and %jobs show, as text")
    step: int | None
    total_steps: int | None
    loss: float | None
    samples_per_second: float | None
    created: float
    started: float | None
    ended: float | None
    elapsed_seconds: float | None
    remaining_seconds: float | None
    cost_usd: float | None = Field(description="cost so far (from billable time on SageMaker)")
    projected_cost_usd: float | None = Field(description="while running: cost so far plus the steps left at the "
                                             "measured steady pace")
    budget: dict[str, Any] | None = Field(description="train.budget_usd's state: budget_usd, cost_usd when the "
                                          "job last checked it, and reached: 'warning' (90%) or 'stopped' (100%)")
    message: str | None
    loss_series: list[float] = Field(description="train loss over the run, thinned to a sparkline's points")

    @classmethod
    def of(cls, record: JobRecord, loss_series: list[float]) -> JobSummary:
        return cls(**cls._fields(record), loss_series=loss_series)

    @staticmethod
    def _fields(record: JobRecord) -> dict[str, Any]:
        return {
            "id": record.id, "name": record.name, "task": record.task, "backend": record.backend,
            "status": record.status, "stage": record.stage,
            "display": {key: str(value) for key, value in listing_row(record).items()},
            "step": record.step, "total_steps": record.total_steps, "loss": record.loss,
            "samples_per_second": record.samples_per_second, "created": record.created,
            "started": record.started, "ended": record.ended, "elapsed_seconds": record.elapsed,
            "remaining_seconds": remaining_seconds(record), "cost_usd": cost_usd(record),
            "projected_cost_usd": projected_cost_usd(record), "budget": budget_state(record),
            "message": record.message,
        }


def budget_state(record: JobRecord) -> dict[str, Any] | None:
    """The job's latest budget record with its summary in words (the panel shows that sentence)."""
    latest = record.info.get(budget.INFO_KEY)
    try:
        return {**latest, "summary": budget.summary(latest)}
    except (TypeError, KeyError, ValueError, ZeroDivisionError):  # none, or a bad stored value: no budget shown
        return None


class JobDetail(JobSummary):
    """One job in full: the summary plus its stages, exit code and backend facts."""

    host: str
    exit_code: int | None
    stages: list[dict[str, Any]]
    resumed_from: str | None
    info: dict[str, Any]
    planned: list[str] = Field(description="the planner's forecast beside what the job measured, with the ratio "
                                           "(as `nbtoolkit show` prints it)")
    tracking: list[str] = Field(description="the run name and where each experiment tracker writes")

    @classmethod
    def of(cls, record: JobRecord, loss_series: list[float], *, planned: list[str],
           tracking: list[str]) -> JobDetail:
        return cls(**cls._fields(record), loss_series=loss_series, host=record.host, exit_code=record.exit_code,
                   stages=record.stages, resumed_from=record.resumed_from, info=record.info, planned=planned,
                   tracking=tracking)


class JobList(BaseModel):
    jobs: list[JobSummary]
    total: int = Field(description="jobs matching the filter, all pages")
    limit: int
    offset: int


class MetricsPage(BaseModel):
    """Metric records written after cursor `since`; pass `next` as `since` to get only newer ones."""

    records: list[dict[str, Any]]
    since: int
    next: int
    status: str


class LogPage(BaseModel):
    """Log text from byte `offset`; pass `next` as `offset` to get only newer text."""

    text: str
    offset: int
    next: int
    size: int = Field(description="the log's size in bytes when read")
    status: str
