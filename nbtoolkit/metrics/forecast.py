"""The planner's forecast of a job, kept in its record at launch, next to what the job measured.

`nbtoolkit show` and `%job` print both with their ratio, so every run says how far to trust the
planner: device memory per rank, steady samples/s, wall hours and cost.
"""

from __future__ import annotations

from typing import Any

from nbtoolkit.metrics.past_pace import PastPace
from nbtoolkit.metrics.throughput import steady_state
from nbtoolkit.runner.listing import cost_usd
from nbtoolkit.runner.store import JobRecord

#: the key of the forecast in a job record's info
INFO_KEY = "forecast"
#: where the forecast's samples/s came from, when past jobs gave it
PACE_FROM = "samples_per_second_from"
GiB = 2**30


def forecast(spec, past: PastPace | None = None) -> dict[str, float | str | None] | None:
    """What the planner predicts for this spec (at the pace of past jobs of its setup, when there are some),
    or None when it cannot size the model (an unknown hub id offline, a user's own script)."""
    from nbtoolkit.hardware.catalog import CatalogError
    from nbtoolkit.planner import plan

    try:
        result = plan(
            spec,
            alternatives=False,
            measured=past.samples_per_second if past else None,
            measured_from=past.describe() if past else None,
        )
    except (ValueError, CatalogError):  # a model shape it cannot read, an instance type it does not know
        return None
    return {
        "device_memory_gib": result.per_device_bytes / GiB if result.device_memory_bytes else None,
        "samples_per_second": result.samples_per_second,
        "hours": result.hours,
        "cost_usd": result.cost_usd,
        PACE_FROM: past.describe() if past else None,
    }


def measured(record: JobRecord, records: list[dict[str, Any]]) -> dict[str, float | None]:
    """The same quantities from the job itself: rank 0's peak device memory, steady samples/s, wall time, cost."""
    summary: dict[str, Any] = next((item for item in reversed(records) if item.get("kind") == "summary"), {})
    device_mb = summary.get("peak_device_memory_mb")
    return {
        "device_memory_gib": device_mb * 2**20 / GiB if device_mb else None,
        "samples_per_second": steady_state(records).samples_per_second,
        "hours": record.elapsed / 3600 if record.elapsed is not None and not record.active else None,
        "cost_usd": cost_usd(record) if not record.active else None,
    }


LABELS = {
    "device_memory_gib": ("memory per device", "{:.1f} GiB"),
    "samples_per_second": ("steady samples/s", "{:.1f}"),  # after the first logging window
    "hours": ("hours", "{:.2f}"),
    "cost_usd": ("cost", "${:,.2f}"),
}


def comparison_lines(record: JobRecord, records: list[dict[str, Any]]) -> list[str]:
    """`samples/s   predicted 310.0   measured 275.2   0.89x`, one line per quantity either side knows."""
    predicted = record.info.get(INFO_KEY) or {}
    actual = measured(record, records)
    lines = []
    for key, (label, number) in LABELS.items():
        before, after = predicted.get(key), actual.get(key)
        if before is None and after is None:
            continue
        ratio = f"{after / before:.2f}x" if before and after is not None else ""
        lines.append(
            f"{label:<18} predicted {number.format(before) if before is not None else '-':>10}   "
            f"measured {number.format(after) if after is not None else '-':>10}   {ratio}".rstrip()
        )
    if predicted.get(PACE_FROM):
        lines.append(f"(the predicted pace is that of {predicted[PACE_FROM]})")
    return lines
