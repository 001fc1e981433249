"""train.budget_usd: the record a training program writes as a job nears and reaches its budget.

Rank 0's BudgetCallback appends a `kind: budget` record to metrics.jsonl at 90% of the budget
(`reached: warning`) and at 100% (`reached: stopped`, with a checkpoint saved and training ended).
The supervisor keeps the latest in the job's info (the panel shows it) and ends a job whose
program stopped at its budget as `stopped`, with `stop_message` saying why and how to go on.
"""

from __future__ import annotations

from typing import Any

KIND = "budget"
#: the key of the latest budget record in a job record's info
INFO_KEY = "budget"
#: the share of the budget at which the job warns
WARN_AT = 0.9


def reached(cost_usd: float, budget_usd: float) -> str | None:
    """'stopped' once the cost is the budget or more, 'warning' from WARN_AT of it, else None."""
    if cost_usd >= budget_usd:
        return "stopped"
    return "warning" if cost_usd >= WARN_AT * budget_usd else None


def budget_record(*, time: float, step: int, cost_usd: float, budget_usd: float, state: str) -> dict[str, Any]:
    return {"time": time, "step": step, "kind": KIND, "cost_usd": round(cost_usd, 6), "budget_usd": budget_usd,
            "reached": state}


def summary(record: dict[str, Any]) -> str:
    """`$0.09 of the $0.10 budget spent (90%) at step 12`"""
    cost, budget = record["cost_usd"], record["budget_usd"]
    return f"${cost:,.2f} of the ${budget:,.2f} budget spent ({100 * cost / budget:.0f}%) at step {record['step']}"


def stop_message(record: dict[str, Any]) -> str:
    return (f"stopped at its budget: {summary(record)}; it saved a checkpoint there, and `nbtoolkit resume JOB "
            "--budget-usd AMOUNT` continues it with a new budget")
