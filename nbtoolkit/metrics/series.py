"""Reading metrics.jsonl: incrementally (only new bytes) and tolerant of a torn last line.

This is where records enter nbtoolkit, so this is where they are made safe: a user's script
may write its own metrics.jsonl with anything in it (`"step": "abc"`, a dict for a loss).
Values that are not numbers are left out of the record (noted once per field), so every
reader downstream (progress, listings, charts, comparisons) can trust the types.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nbtoolkit.metrics.budget import KIND as BUDGET_KIND
from nbtoolkit.metrics.throughput import seconds_per_step

METRICS_FILE = "metrics.jsonl"
#: in the job folder once a user's program writes records itself (autolog's Trainer callback, nbtoolkit.log):
#: from then on its log is not parsed, so no step is recorded twice
STRUCTURED_MARKER = "metrics.from-program"
#: the fields that hold text; every other value is a number (or null for "not a number this time")
TEXT_FIELDS = ("kind", "stage", "reached")
#: fields that count something, so whole numbers
INTEGER_FIELDS = ("step", "max_steps")

#: the longest line a bounded read takes (a metrics record or log line is far shorter)
MAX_LINE_BYTES = 1024 * 1024


@dataclass
class MetricsReader:
    """Follows a metrics.jsonl: each `read_new()` returns the records completed since the last.

    A last line without its newline is being written right now: it is left for the next call.
    A complete line that is not JSON (a crash mid-write long ago) is skipped. `notes` says, once
    per field, which values were left out for not being numbers.
    """

    path: Path
    offset: int = 0
    notes: list[str] = field(default_factory=list)
    _dropped: set[str] = field(default_factory=set, repr=False)

    def read_new(self, max_bytes: int | None = None) -> list[dict[str, Any]]:
        """With `max_bytes`, only the whole lines within that many bytes (at least one line)."""
        try:
            with open(self.path, "rb") as handle:
                handle.seek(self.offset)
                chunk = handle.read() if max_bytes is None else handle.read(max_bytes)
                if max_bytes is not None and b"\n" not in chunk:
                    chunk += handle.readline(MAX_LINE_BYTES)  # a line longer than max_bytes still comes whole
        except FileNotFoundError:
            return []
        end = chunk.rfind(b"\n")
        if end < 0 and max_bytes is not None and len(chunk) == max_bytes + MAX_LINE_BYTES:
            self.offset += len(chunk)  # no record is this long: pass it (its rest reads as a line that is not JSON)
            self.notes.append(f"{self.path.name}: a line over {MAX_LINE_BYTES} bytes is left out")
            return []
        if end < 0:
            return []
        self.offset += end + 1
        dropped: set[str] = set()
        records = parse_lines(chunk[: end + 1], dropped)
        for key in sorted(dropped - self._dropped):
            self.notes.append(f"{self.path.name}: '{key}' values that are not numbers are left out")
        self._dropped |= dropped
        return records


def parse_lines(chunk: bytes, dropped: set[str] | None = None) -> list[dict[str, Any]]:
    """The records of whole lines, each with only values of the types the contract gives them;
    the names of fields left out are added to `dropped`."""
    dropped = dropped if dropped is not None else set()
    return [sanitized(record, dropped) for record in _raw_records(chunk)]


def sanitized(record: dict[str, Any], dropped: set[str]) -> dict[str, Any]:
    """The record with text only in TEXT_FIELDS, whole numbers in INTEGER_FIELDS and numbers elsewhere.

    A number written as text ("4.766", as transformers 5 prints them) becomes the number; a value
    that is no number at all is left out and its field name added to `dropped`.
    """
    clean: dict[str, Any] = {}
    for key, value in record.items():
        kept = _value(key, value)
        if kept is _DROP:
            dropped.add(str(key))
        else:
            clean[key] = kept
    return clean


_DROP = object()


def _value(key: str, value: Any) -> Any:
    if key in TEXT_FIELDS:
        return value if isinstance(value, str) else _DROP
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            return _DROP
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return _DROP
    if key in INTEGER_FIELDS:
        return int(value) if float(value).is_integer() else _DROP
    return value


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
    #: the mean reward a grpo run logs (TRL's `reward`)
    reward: float | None = None
    records: int = 0
    extras: dict[str, Any] = field(default_factory=dict)
    #: the first and the latest timed train record: the steady pace lies between them
    pace_ends: list[dict[str, Any]] = field(default_factory=list)
    #: the latest train.budget_usd record (warning or stopped), if the program wrote one
    budget: dict[str, Any] | None = None

    @property
    def seconds_per_step(self) -> float | None:
        return seconds_per_step(self.pace_ends)

    def update(self, records: list[dict[str, Any]]) -> bool:
        """Fold new records in; True if anything a listing shows changed."""
        before = (self.step, self.total_steps, self.loss, self.reward, self.samples_per_second, self.seconds_per_step)
        for record in records:
            self.records += 1
            if record.get("step") is not None:
                self.step = int(record["step"])
            if record.get("max_steps"):
                self.total_steps = int(record["max_steps"])
            if record.get("kind") == "train":
                self.loss = record.get("loss", self.loss)
                self.reward = record.get("reward", self.reward)
                if record.get("time") is not None and record.get("step") is not None:
                    self.pace_ends = [*self.pace_ends[:1], record]
            if record.get("kind") == BUDGET_KIND:
                self.budget = record
            if record.get("kind") in ("train", "summary"):  # a log's only figure may be the summary's average
                self.samples_per_second = record.get("samples_per_second", self.samples_per_second)
        return before != (
            self.step,
            self.total_steps,
            self.loss,
            self.reward,
            self.samples_per_second,
            self.seconds_per_step,
        )


#: the value whose lowest and highest a downsampled series keeps, per kind of record
PRIMARY_VALUE = {"train": "loss", "eval": "eval_loss"}


def complete_end(path: Path) -> int:
    """The offset just past the file's last newline: records after it are still being written."""
    with open(path, "rb") as handle:
        end = handle.seek(0, 2)
        while end > 0:
            start = max(0, end - 64 * 1024)
            handle.seek(start)
            block = handle.read(end - start)
            if b"\n" in block:
                return start + block.rfind(b"\n") + 1
            end = start
    return 0


def _whole_lines(handle, start: int, stop: int, end: int, longest: int = MAX_LINE_BYTES) -> bytes:
    """The lines that start in [start, stop), whole (the last one completed past `stop` by at most `longest`
    bytes, never past `end`: one not complete by then is left cut, and no JSON); a line cut at `start` belongs to
    what comes before."""
    at_line_start = start == 0 or _byte_before(handle, start) == b"\n"
    handle.seek(start)
    chunk = handle.read(min(stop, end) - start)
    if chunk and not chunk.endswith(b"\n"):
        chunk += handle.readline(max(0, min(longest, end - start - len(chunk))))
    if not at_line_start:
        cut = chunk.find(b"\n")
        chunk = chunk[cut + 1 :] if cut >= 0 else b""
    return chunk


def tail_records(path: Path, max_bytes: int) -> list[dict[str, Any]]:
    """The complete records in the last `max_bytes` of a metrics.jsonl (the whole file when it is smaller)."""
    try:
        end = complete_end(path)
        with open(path, "rb") as handle:
            return parse_lines(_whole_lines(handle, max(0, end - max_bytes), end, end))
    except FileNotFoundError:
        return []


def _line_start(handle, position: int) -> int:
    """Where the line holding byte `position` starts (looking back at most MAX_LINE_BYTES)."""
    start = max(0, position - MAX_LINE_BYTES)
    handle.seek(start)
    return start + handle.read(position - start).rfind(b"\n") + 1


def _byte_before(handle, position: int) -> bytes:
    handle.seek(position - 1)
    return handle.read(1)


def downsample(path: Path, since: int, buckets: int, budget_bytes: int) -> tuple[list[dict[str, Any]], int]:
    """The records after byte `since`, at most a few per bucket of bytes: (records, the offset they end at).

    The range is cut into `buckets` equal byte ranges; each keeps, per kind of record, the one with the
    lowest and the one with the highest PRIMARY_VALUE and its last one, so spikes and the run's end show.
    At most `budget_bytes` are read in windows: a range larger than that is read in a window at the start of
    each bucket (the last bucket: at its end, so the latest record is always there); finishing the windows'
    last lines reads at most `budget_bytes` more, so a line longer than that is skipped. Time and memory
    depend on `buckets` and `budget_bytes`, never on the file's size.
    """
    try:
        end = complete_end(path)
    except FileNotFoundError:
        return [], since
    span = end - since
    window = max(1, budget_bytes // buckets)
    kept: list[tuple[int, int, dict[str, Any]]] = []  # (bucket, index among its records, record)
    completing = budget_bytes  # what finishing the windows' last lines may read in all: a huge line is skipped once
    with open(path, "rb") as handle:
        for bucket in range(buckets if span > 0 else 0):
            low, high = since + span * bucket // buckets, since + span * (bucket + 1) // buckets
            if high - low > window:  # read a window of it: at its start, or for the last bucket its end
                last = bucket == buckets - 1  # (at least the whole last line: the latest record always shows)
                low = max(low, min(high - window, _line_start(handle, end - 1))) if last else low
                high = high if last else low + window
            chunk = _whole_lines(handle, low, high, end, min(MAX_LINE_BYTES, completing)) if high > low else b""
            completing -= max(0, handle.tell() - min(high, end)) if high > low else 0
            records = _raw_records(chunk)
            kept += [(bucket, index, sanitized(records[index], set())) for index in _extremes_and_last(records)]
    kept.sort(key=lambda item: item[:2])
    return [record for _, _, record in kept], max(end, since)


def _raw_records(chunk: bytes) -> list[dict[str, Any]]:
    """The JSON objects of whole lines, as written (only the ones kept are sanitized: that is most of the cost)."""
    records = []
    for line in chunk.splitlines():
        try:
            record = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if isinstance(record, dict):
            records.append(record)
    return records


def _extremes_and_last(records: list[dict[str, Any]]) -> set[int]:
    """Indexes of the records to keep: per kind, the lowest and highest primary value and the last record."""
    chosen: set[int] = set()
    by_kind: dict[Any, list[int]] = {}
    for index, record in enumerate(records):
        kind = record.get("kind")
        by_kind.setdefault(kind if isinstance(kind, str) else None, []).append(index)
    for kind, indexes in by_kind.items():
        chosen.add(indexes[-1])
        key = PRIMARY_VALUE.get(kind)
        if key is None:  # a kind without a primary value keeps its last record only
            continue
        valued = [(value, index) for index in indexes if (value := _number(records[index].get(key))) is not None]
        if valued:
            chosen.add(min(valued)[1])
            chosen.add(max(valued)[1])
    return chosen


def _number(value: Any) -> float | None:
    """A finite number, also one written as text (transformers 5 prints "4.766"); else None."""
    if isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None
