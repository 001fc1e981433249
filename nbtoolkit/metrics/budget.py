"""train.budget_usd: the record a training program writes as a job nears and reaches its budget.

Rank 0's BudgetCallback appends a `kind: budget` record to metrics.jsonl at 90% of the budget
(`reached: warning`) and at 100% (`reached: stopped`, with a checkpoint saved and training ended).
Its log line says the same (`log_line`), and a log parser reads it back (`from_log_line`): that is how
the record of a program whose metrics.jsonl stays remote (SageMaker) arrives. The supervisor keeps the
latest in the job's info (the panel shows it) and ends a job whose program stopped at its budget as
`stopped`, with `stop_message` saying why and how to go on.
"""

from __future__ import annotations

import re
from typing import Any

KIND = "budget"
#: the key of the latest budget record in a job record's info
INFO_KEY = "budget"
#: the share of the budget at which the job warns
WARN_AT = 0.9
#: the program's budget line in a log
LOG_MARK = "[nbtoolkit] budget: "
LOG_LINE = re.compile(
    r"\[nbtoolkit\] budget: \$([\d,]+\.\d+) of the \$([\d,]+\.\d+) budget spent \(\d+%\) "
    r"at step (\d+); (stopping)?"
)


def reached(cost_usd: float, budget_usd: float) -> str | None:
    """'stopped' once the cost is the budget or more, 'warning' from WARN_AT of it, else None."""
    if cost_usd >= budget_usd:
        return "stopped"
    return "warning" if cost_usd >= WARN_AT * budget_usd else None


def budget_record(*, time: float, step: int, cost_usd: float, budget_usd: float, state: str) -> dict[str, Any]:
    return {
        "time": time,
        "step": step,
        "kind": KIND,
        "cost_usd": round(cost_usd, 6),
        "budget_usd": budget_usd,
        "reached": state,
    }


def summary(record: dict[str, Any]) -> str:
    """`$0.09 of the $0.10 budget spent (90%) at step 12`; under the budget, with the decimals it takes for the cost
    to read less than the budget (`$0.036 of the $0.040`, not `$0.04 of the $0.04 ... (91%)`)."""
    cost, budget = record["cost_usd"], record["budget_usd"]
    digits = 2
    while cost < budget and digits < 6 and f"{cost:.{digits}f}" == f"{budget:.{digits}f}":
        digits += 1
    return (
        f"${cost:,.{digits}f} of the ${budget:,.{digits}f} budget spent ({100 * cost / budget:.0f}%) "
        f"at step {record['step']}"
    )


def log_line(record: dict[str, Any]) -> str:
    """`[nbtoolkit] budget: $0.09 of the $0.10 budget spent (90%) at step 12; the job stops with a checkpoint ...`"""
    said = "stopping with a checkpoint" if record["reached"] == "stopped" else "the job stops with a checkpoint at 100%"
    return f"{LOG_MARK}{summary(record)}; {said}"


def from_log_line(line: str, time: float) -> dict[str, Any] | None:
    """The record of a budget line (cost and budget as precise as the line gives them), else None."""
    found = LOG_LINE.search(line)
    if found is None:
        return None
    cost, budget, step, stopping = found.groups()
    return budget_record(
        time=time,
        step=int(step),
        cost_usd=float(cost.replace(",", "")),
        budget_usd=float(budget.replace(",", "")),
        state="stopped" if stopping else "warning",
    )


def stop_message(record: dict[str, Any], job_id: str) -> str:
    return (
        f"stopped at its budget: {summary(record)}; it saved a checkpoint there, and `nbtoolkit resume {job_id} "
        "--budget-usd AMOUNT` continues it with a new budget"
    )
