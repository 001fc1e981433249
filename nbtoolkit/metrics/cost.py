"""What a job costs: one figure, from one function, that every view reads.

`cost_usd` is billable seconds x the run's hourly price (instance price x instances). The budget (the
training program's check and the supervisor's stop sentence), `nbtoolkit jobs` and `show`, `%job`, the
chart's title and the panel all take their figure from it, so they agree to the cent. Billable time is
what the provider bills: an instance billed from its start counts the job's start-up (imports, model
load) from the moment its supervisor started it; SageMaker reports its own billable seconds, which
already carry a spot job's discount.
"""

from __future__ import annotations

import os

#: when billing began for the job a training process belongs to (Unix time, set by the supervisor)
BILLED_SINCE_ENV = "NBTOOLKIT_BILLED_SINCE"


def cost_usd(hourly_price_usd: float | None, billable_seconds: float | None) -> float | None:
    """USD for `billable_seconds` of a run priced at `hourly_price_usd` (None when either is unknown)."""
    if hourly_price_usd is None or billable_seconds is None:
        return None
    return float(hourly_price_usd) * max(float(billable_seconds), 0.0) / 3600


def billed_since(default: float) -> float:
    """When this process's job began to be billed: its supervisor's start, else `default` (a process started
    by hand or on a remote engine, where the engine's own billable seconds are the figure that counts)."""
    try:
        return float(os.environ[BILLED_SINCE_ENV])
    except (KeyError, ValueError):
        return default
