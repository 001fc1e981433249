"""Reading metrics.jsonl: incrementally (only new bytes) and tolerant of a torn last line."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

METRICS_FILE = "metrics.jsonl"


@dataclass
class MetricsReader:
    """Follows a metrics.jsonl: each `read_new()` returns the records completed since the last.

    A last line without its newline is being written right now: it is left for the next call.
    A complete line that is not JSON (a crash mid-write long ago) is skipped.
    """

    path: Path
    offset: int = 0

    def read_new(self, max_bytes: int | None = None) -> list[dict[str, Any]]:
        """With `max_bytes`, only the whole lines within that many bytes (at least one line)."""
        try:
            with open(self.path, "rb") as handle:
                handle.seek(self.offset)
                chunk = handle.read() if max_bytes is None else handle.read(max_bytes)
                if max_bytes is not None and b"\n" not in chunk:
                    chunk += handle.readline()  # a line longer than max_bytes still comes whole
        except FileNotFoundError:
            return []
        end = chunk.rfind(b"\n")
        if end < 0:
            return []
        self.offset += end + 1
        return parse_lines(chunk[: end + 1])


def parse_lines(chunk: bytes) -> list[dict[str, Any]]:
    records = []
    for line in chunk.splitlines():
        try:
            record = json.loads(line)
        except (ValueError, RecursionError):  # not JSON, or nested too deep to decode
            continue
        if isinstance(record, dict):
            records.append(record)
    return records


def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    """Every complete record of a metrics.jsonl (or of a job directory)."""
    path = Path(path)
    if path.is_dir():
        path = path / METRICS_FILE
    return MetricsReader(path).read_new()


@dataclass
class Progress:
    """The latest of a series, as job listings show it."""

    step: int | None = None
    total_steps: int | None = None
    loss: float | None = None
    samples_per_second: float | None = None
    records: int = 0
    extras: dict[str, Any] = field(default_factory=dict)

    def update(self, records: list[dict[str, Any]]) -> bool:
        """Fold new records in; True if anything a listing shows changed."""
        before = (self.step, self.total_steps, self.loss, self.samples_per_second)
        for record in records:
            self.records += 1
            if record.get("step") is not None:
                self.step = int(record["step"])
            if record.get("max_steps"):
                self.total_steps = int(record["max_steps"])
            if record.get("kind") == "train":
                self.loss = record.get("loss", self.loss)
                self.samples_per_second = record.get("samples_per_second", self.samples_per_second)
        return before != (self.step, self.total_steps, self.loss, self.samples_per_second)
