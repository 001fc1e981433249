"""Steady-state throughput: speed once warm-up (and compile) is over, from a job's records.

The first logging windows carry start-up cost (allocations, torch.compile, Neuron graphs);
counting them makes a compiled run look slower than it is, so they are reported apart.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Throughput:
    samples_per_second: float | None
    tokens_per_second: float | None
    warmup_seconds: float  # training time of the windows left out
    steady_seconds: float  # training time of the windows averaged
    windows: int


def steady_state(records: list[dict[str, Any]], warmup_steps: int | None = None) -> Throughput:
    """Time-weighted throughput of the train windows ending after `warmup_steps`.

    Default warm-up: the first window. Each train record covers `window_seconds` of training
    since the previous one (records without it, e.g. parsed logs, count equally).
    """
    train = [r for r in records if r.get("kind") == "train" and r.get("samples_per_second")]
    if not train:
        return Throughput(None, None, 0.0, 0.0, 0)
    cut = train[0]["step"] if warmup_steps is None else warmup_steps
    steady = [r for r in train if r["step"] > cut] or train[-1:]
    warm = [r for r in train if r not in steady]
    return Throughput(
        samples_per_second=_weighted_mean(steady, "samples_per_second"),
        tokens_per_second=_weighted_mean(steady, "tokens_per_second"),
        warmup_seconds=sum(_seconds(r) for r in warm),
        steady_seconds=sum(_seconds(r) for r in steady),
        windows=len(steady),
    )


def seconds_per_step(records: list[dict[str, Any]]) -> float | None:
    """Wall-clock pace since the first logging window (warm-up left out): what each step left will take.

    Measured between the train records' timestamps, so evaluation and checkpoint time count: they
    take time (and, on rented hardware, money) every bit as training does.
    """
    train = [r for r in records if r.get("kind") == "train" and r.get("time") is not None and r.get("step") is not None]
    if len(train) < 2 or train[-1]["step"] <= train[0]["step"]:
        return None
    return (train[-1]["time"] - train[0]["time"]) / (train[-1]["step"] - train[0]["step"])


def _seconds(record: dict[str, Any]) -> float:
    return float(record.get("window_seconds") or 1.0)


def _weighted_mean(records: list[dict[str, Any]], key: str) -> float | None:
    windows = [(record[key], _seconds(record)) for record in records if record.get(key)]
    total = sum(seconds for _, seconds in windows)
    return sum(speed * seconds for speed, seconds in windows) / total if total else None
