"""The REST API's bodies (pydantic): what the sidebar panel reads. openapi.yaml and the panel's TypeScript types are
generated from them (`make api-types`)."""

from __future__ import annotations

from dataclasses import fields
from typing import Any, Literal, Self

from pydantic import BaseModel, Field

from nbtoolkit.metrics import budget
from nbtoolkit.runner import health_watch
from nbtoolkit.runner.health import training_warning
from nbtoolkit.runner.listing import cost_usd, listing_row, projected_cost_usd, remaining_seconds
from nbtoolkit.runner.store import ACTIVE, JobRecord, JobStatus
from nbtoolkit.trained_model.serve import URL_KEY

#: the job row's columns: a body's field of the same name carries the column as stored
_ROW_COLUMNS = {column.name for column in fields(JobRecord)}


class Budget(BaseModel):
    """train.budget_usd's latest record: warning at 90% spent, stopped at 100% (a checkpoint saved, training ended)."""

    reached: str = Field(description="warning or stopped")
    cost_usd: float = Field(description="the cost when the job last checked its budget")
    budget_usd: float
    step: int
    time: float
    kind: str
    summary: str = Field(description="`$0.09 of the $0.10 budget spent (90%) at step 12`")


class JobSummary(BaseModel):
    """One row of the job list: the listing's strings for people plus the raw numbers a panel draws."""

    id: str
    name: str
    task: str
    backend: str = Field(
        description="the backend that runs it: one of `nbtoolkit.backends.names()` (local, torchrun, "
        "deepspeed, neuron, sagemaker, slurm, or a plugin's)"
    )
    status: JobStatus
    active: bool = Field(description=f"whether the job is {' or '.join(ACTIVE)}: it may still change")
    stage: str | None = Field(description="the running stage, e.g. train or compile")
    display: dict[str, str] = Field(description="the columns `nbtoolkit jobs` and %jobs show, as text")
    step: int | None
    total_steps: int | None
    loss: float | None = Field(description="last train loss")
    samples_per_second: float | None = Field(description="throughput of the last logging window")
    created: float = Field(description="Unix time")
    started: float | None
    ended: float | None
    elapsed_seconds: float | None
    remaining_seconds: float | None = Field(
        description="while running: the steps left at the measured steady pace "
        "(before one is measured, at the pace so far)"
    )
    cost_usd: float | None = Field(
        description="cost so far: a SageMaker job's from its billable time, else hourly price x elapsed"
    )
    projected_cost_usd: float | None = Field(
        description="while running: cost so far plus the time left at the job's (billed) hourly price"
    )
    budget: Budget | None
    message: str | None = Field(description="why it failed or stopped")
    warning: str | None = Field(
        description="a succeeded job whose numbers say it learned nothing: why, e.g. `learned nothing: the reward "
        "is NaN or infinite at every logging step since step 10` (the run doctor's training anomalies)"
    )
    loss_series: list[float] = Field(
        description="train loss over the run (4 significant digits), thinned to a sparkline's points"
    )
    health_state: Literal["ok", "slow", "stalled", "unknown"] | None = Field(
        description="while running: the run doctor's last word on its ranks (the supervisor's check every 2 s)"
    )
    url: str | None = Field(
        description="a server job's (`nbtoolkit serve`) OpenAI-compatible base URL while it runs, e.g. "
        "`http://127.0.0.1:8000/v1`"
    )

    @classmethod
    def of(cls, record: JobRecord, loss_series: list[float], **facts: Any) -> Self:
        """The body of one job: the row's columns this body names, as stored, what is worked out from them, and
        `facts` (what the row does not hold)."""
        stored = {name: getattr(record, name) for name in cls.model_fields if name in _ROW_COLUMNS}
        return cls(
            **stored,
            active=record.active,
            display={key: str(value) for key, value in listing_row(record).items()},
            elapsed_seconds=record.elapsed,
            remaining_seconds=remaining_seconds(record),
            cost_usd=cost_usd(record),
            projected_cost_usd=projected_cost_usd(record),
            budget=budget_state(record),
            loss_series=loss_series,
            warning=training_warning(record),
            health_state=(record.info.get(health_watch.INFO_KEY) or {}).get("state") if record.active else None,
            url=f"{record.info[URL_KEY]}/v1" if record.active and URL_KEY in record.info else None,
            **facts,
        )


def budget_state(record: JobRecord) -> Budget | None:
    """The job's latest budget record with its summary in words (the panel shows that sentence)."""
    latest = record.info.get(budget.INFO_KEY)
    if latest is None:
        return None
    try:
        return Budget(**latest, summary=budget.summary(latest))
    except (TypeError, KeyError, ValueError, ZeroDivisionError):  # a bad stored value: no budget shown
        return None


class HarnessRow(BaseModel):
    """One task and metric of the job's last lm-evaluation-harness comparison (`nbtoolkit eval`)."""

    task: str
    metric: str
    base: float | None = Field(description="the base model's value; null when the base was not evaluated")
    tuned: float | None
    difference: float | None = Field(description="tuned minus base")
    base_stderr: float | None
    tuned_stderr: float | None


class HarnessComparison(BaseModel):
    """The job's last lm-evaluation-harness comparison (`nbtoolkit eval`), base beside tuned."""

    tasks: list[str]
    limit: float | None = Field(description="examples per task (a count, or a fraction); null: every example")
    note: str = Field(description="what the numbers are of, in words: the examples, a base not evaluated and why")
    rows: list[HarnessRow]


class JobDetail(JobSummary):
    """One job in full: the summary plus its stages, exit code and backend facts."""

    host: str
    exit_code: int | None
    stages: list[dict[str, Any]] = Field(
        description="the job's stages (e.g. compile, train) with their status and times"
    )
    resumed_from: str | None = Field(description="the job whose checkpoint this one continues")
    info: dict[str, Any] = Field(description="backend facts (prices, remote names)")
    planned: list[str] = Field(
        description="the planner's forecast beside what the job measured, with the ratio "
        "(as `nbtoolkit show` prints it)"
    )
    tracking: list[str] = Field(description="the run name and where each experiment tracker writes")
    model_from: str | None = Field(description="the earlier job whose model this one started from (model: job:ID)")
    harness: HarnessComparison | None = Field(description="the job's last lm-eval comparison; null: none yet")


class JobList(BaseModel):
    """One page of jobs, newest first."""

    jobs: list[JobSummary]
    total: int = Field(description="jobs matching the filter, all pages")
    limit: int
    offset: int


class MetricsPage(BaseModel):
    """Metric records written after cursor `since`; pass `next` as `since` to get only newer ones."""

    records: list[dict[str, Any]] = Field(
        description="metrics.jsonl records (time, step, epoch, kind, loss, samples_per_second, ...)"
    )
    since: int
    next: int = Field(description="pass as `since` next time")
    status: JobStatus
    downsampled: bool = Field(
        False,
        description="the records are a few per stretch of the file (per kind: the lowest and highest loss, and the "
        "last), not every record",
    )


class LogPage(BaseModel):
    """Log text from byte `offset`; pass `next` as `offset` to get only newer text."""

    text: str
    offset: int = Field(description="where the text starts")
    next: int = Field(description="pass as `offset` next time")
    size: int = Field(description="the log's size in bytes when read")
    status: JobStatus


class ErrorMessage(BaseModel):
    """A request the API refuses: one sentence that says what is wrong and what would be valid."""

    message: str


class RankHealth(BaseModel):
    """One rank's last heartbeat, as the run doctor reads it (nbtoolkit.runner.health)."""

    rank: int
    step: int | None
    last_step_ago: float | None = Field(description="seconds since the rank last finished a step")
    step_time: float | None = Field(description="seconds per step over its recent steps")
    host: str | None
    pid: int | None
    memory_mb: float | None = Field(description="device memory the rank holds, or its host memory off GPU")
    memory_kind: str | None = Field(description="device or host")
    alive: bool | None = Field(description="whether its process lives (null: on another host)")
    slow: bool = Field(description="a straggler: its step time well above the others'")
    stalled: bool = Field(description="no step for longer than the stall limit")


class JobHealth(BaseModel):
    """A running job's health: ok, slow (a straggler), stalled (no rank steps), or unknown (not running, no report)."""

    state: Literal["ok", "slow", "stalled", "unknown"]
    reason: str = Field(description="why, in one sentence")
    ranks: list[RankHealth]
    stall_after_s: float | None = Field(description="seconds without a step after which the job counts as stalled")
    training: list[str] = Field(
        description="what the numbers say, one sentence each: loss or a reward NaN, gradient norm 0, a loss or "
        "reward that does not move, no reward (empty: nothing wrong seen)"
    )


class StacksReply(BaseModel):
    """Every rank's Python stack, grouped by identical stacks, as `nbtoolkit stacks` prints it."""

    summary: str = Field(description="`rank 7 in wait_for_data (...); ranks 0-6 in all_reduce (...)`")
    text: str = Field(description="the whole report, main threads, innermost frame first")
    path: str = Field(description="where the report is saved in the job folder")


class CheckpointReply(BaseModel):
    """A checkpoint request a running job accepted: its ranks save at their next steps and carry on."""

    message: str


class ForkReply(BaseModel):
    """The job a fork started."""

    id: str
    name: str
    message: str
