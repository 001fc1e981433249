"""The columns every job listing shows (CLI `jobs`, `%jobs`, the REST list), computed once."""

from __future__ import annotations

import time
from typing import Any

from nbtoolkit.metrics import cost
from nbtoolkit.runner.health import training_verdict
from nbtoolkit.runner.store import JobRecord


def duration(seconds: float | None) -> str:
    if seconds is None:
        return ""
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


def clock(timestamp: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(timestamp)) if timestamp else ""


def remaining_seconds(record: JobRecord) -> float | None:
    """Time left while running: the steps left at the measured steady pace (else at the pace so far)."""
    if record.status != "running" or not record.step or not record.total_steps or not record.elapsed:
        return None
    pace = record.seconds_per_step or record.elapsed / record.step
    return pace * max(record.total_steps - record.step, 0)


def billable_seconds(record: JobRecord) -> float | None:
    """What the job is billed for: a remote job's own report (SageMaker's billable seconds, spot discount
    included), else the wall time since its supervisor started it (the instance bills start-up too)."""
    if record.info.get("billable_seconds") is not None:
        return float(record.info["billable_seconds"])
    return record.elapsed


def cost_usd(record: JobRecord) -> float | None:
    """The job's cost so far, the one figure every view shows (`metrics.cost`)."""
    return cost.cost_usd(record.info.get("hourly_price_usd"), billable_seconds(record))


def billed_hourly_usd(record: JobRecord) -> float | None:
    """What an hour more of this job costs: its hourly price, times the share of training time a SageMaker
    spot job is billed for (its billable / training seconds so far)."""
    price = record.info.get("hourly_price_usd")
    if price is None:
        return None
    billable, training = record.info.get("billable_seconds"), record.info.get("training_seconds")
    billed = min(billable / training, 1.0) if billable is not None and training else 1.0
    return float(price) * billed


def projected_cost_usd(record: JobRecord) -> float | None:
    """The total a running job will have cost when it ends: cost so far plus the time left at its price."""
    so_far, left, hourly = cost_usd(record), remaining_seconds(record), billed_hourly_usd(record)
    if so_far is None or left is None or hourly is None:
        return None
    return so_far + hourly * left / 3600


def usd(amount: float | None) -> str:
    return f"${amount:,.2f}" if amount is not None else ""


def cost_text(record: JobRecord) -> str:
    """`cost $0.12 · projected $0.40` (what is known of it), for a chart's title."""
    so_far, projected = cost_usd(record), projected_cost_usd(record)
    parts = [f"cost {usd(so_far)}"] if so_far is not None else []
    return " · ".join(parts + ([f"projected {usd(projected)}"] if projected is not None else []))


def status_text(record: JobRecord) -> str:
    """`running (compile)`, `failed`, or `succeeded, but learned nothing` when its numbers say so."""
    verdict = training_verdict(record)
    stage = f" ({record.stage})" if record.stage and record.stage != "train" else ""
    return record.status + stage + (f", but {verdict}" if verdict else "")


def listing_row(record: JobRecord) -> dict[str, Any]:
    """One job as a listing shows it: short strings for people, nothing that needs the job dir."""
    progress = (
        f"{record.step}/{record.total_steps}"
        if record.step is not None and record.total_steps
        else (str(record.step) if record.step is not None else "")
    )
    return {
        "id": record.id,
        "name": record.name,
        "backend": record.backend,
        "status": status_text(record),
        "progress": progress,
        # a grpo job shows its reward: its loss stays near 0 whatever it learns
        "loss": f"{record.loss:.4f}" if record.loss is not None and record.reward is None else "",
        "reward": f"{record.reward:.3f}" if record.reward is not None else "",
        "samples/s": f"{record.samples_per_second:.1f}" if record.samples_per_second is not None else "",
        "started": clock(record.started),
        "ended": clock(record.ended),
        "elapsed": duration(record.elapsed),
        "remaining": duration(remaining_seconds(record)),
        "cost": usd(cost_usd(record)),
        "projected": usd(projected_cost_usd(record)),
    }


def format_table(rows: list[dict[str, Any]]) -> str:
    """A plain-text table (the CLI's)."""
    if not rows:
        return "no jobs yet; `nbtoolkit run SPEC` or `nbtoolkit demo` starts one"
    headers = list(rows[0])
    widths = {key: max(len(key), *(len(str(row[key])) for row in rows)) for key in headers}
    lines = ["  ".join(key.ljust(widths[key]) for key in headers)]
    lines += ["  ".join(str(row[key]).ljust(widths[key]) for key in headers) for row in rows]
    return "\n".join(line.rstrip() for line in lines)
