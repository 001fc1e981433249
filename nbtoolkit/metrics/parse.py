"""Log lines -> metric records, for programs that write no metrics.jsonl themselves.

Understands the dict lines the HF Trainer prints (float values in transformers 4, string
values in transformers 5), the final `train_runtime` line, eval lines, `[rankN]:` /
`[defaultN]:` prefixes from torchrun, and tqdm progress bars or nbtoolkit's own
`[nbtoolkit] step N/M` lines (which give the step).
Never raises on odd input: a log is whatever a program happened to print.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable
from typing import Any

# `[rank1]:`, `[default0]:` (torchrun --tee), `[1,0]<stdout>:` (mpirun), `0: ` (torchrun -t 3 older)
RANK_PREFIX = re.compile(r"^\s*\[(?:rank|default|[a-z_]+)?(\d+)\]:\s?|^\s*\[1,(\d+)\]<std(?:out|err)>:\s?")
# a number as the Trainer prints it: 4.766, 1e-05, nan, inf (no capturing groups inside)
NUMBER = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|nan|-?inf"


def pair_pattern(key: str) -> str:
    """`'key': '4.766'` or `'key': 4.766` or `"key": 4.766`; the value is the last group.

    `key` is a regex; pass `re.escape(name)` for one metric. SageMaker metric definitions are
    built from this too, so the console's charts read the same numbers as this parser.
    """
    return rf"""['"]{key}['"]\s*:\s*['"]?({NUMBER})['"]?"""


PAIR = re.compile(pair_pattern(r"([A-Za-z_][\w./-]*)"))
# tqdm: ` 12/120 [00:03<00:30,  3.51it/s]`
TQDM = re.compile(r"(?<!\d)(\d{1,15})/(\d{1,15}) \[[\d:]+<[\d:?]+,\s*(\d+(?:\.\d*)?|\?)(it/s|s/it)")
# nbtoolkit.train's own progress line (its log has no tqdm), printed just before the Trainer's dict
# line: the step, and the logging window's throughput (evaluation and checkpoint time left out)
PROGRESS = re.compile(r"\[nbtoolkit\] step (\d{1,15})/(\d{1,15})\b")
WINDOW = re.compile(r"\| (\d{1,15}(?:\.\d{0,15})?) (samples|tokens)/s")


def parse_dict_line(line: str) -> dict[str, float] | None:
    """The numbers of a Trainer-style dict line, or None if the line is not one."""
    start = line.find("{")
    if start < 0 or line.rfind("}") < start:
        return None
    values: dict[str, float] = {}
    for key, raw in PAIR.findall(line, start):
        try:
            values[key] = float(raw)
        except ValueError:
            continue
    return values or None


def classify(values: dict[str, float]) -> str | None:
    """Which kind of record a dict line is: eval, train, summary, or none of ours.

    Train lines may carry a running `train_runtime` too (transformers 5 with token counting);
    the end-of-training summary has `train_loss`, never `loss`.
    """
    if any(key.startswith("eval_") for key in values):
        return "eval"
    if "loss" in values:
        return "train"
    if "train_runtime" in values:
        return "summary"
    if "learning_rate" in values:
        return "train"
    return None


class LogParser:
    """Feed it text as it arrives; it returns the metric records found in complete lines.

    Keeps state across calls: a partial last line, the latest tqdm step/total, and a count
    of train records (used as the step when no progress bar ever appeared).
    """

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._pending = ""
        self._step: int | None = None
        self._total: int | None = None
        self._steps_per_second: float | None = None
        self._window: dict[str, float] = {}
        self._train_records = 0

    def feed(self, text: str) -> list[dict[str, Any]]:
        """Parse newly arrived text (any chunking); return new records."""
        records: list[dict[str, Any]] = []
        lines = (self._pending + text).split("\n")
        self._pending = lines.pop()
        for line in lines:
            records += self._parse_line(line)
        return records

    def flush(self) -> list[dict[str, Any]]:
        """Parse what is left of an unterminated last line (at the end of a log)."""
        rest, self._pending = self._pending, ""
        return self.feed(rest + "\n") if rest else []

    def _parse_line(self, line: str) -> list[dict[str, Any]]:
        """A line is progress-bar updates separated by \\r, some ending in a dict: each dict takes the
        step of the last bar before it, so only that bar is read (a bar per step is most of a log)."""
        records = []
        segments = line.split("\r")
        since_record = 0
        for index, segment in enumerate(segments):
            if "{" in segment:
                self._read_last_progress(segments[since_record:index])
                record = self._parse_segment(segment)
                if record is not None:
                    records.append(record)
                since_record = index + 1
        self._read_last_progress(segments[since_record:])
        return records

    def _read_last_progress(self, segments: list[str]) -> None:
        for segment in reversed(segments):
            rank_zero = self._rank_zero_text(segment)
            if rank_zero is not None and self._read_progress(rank_zero):
                return

    @staticmethod
    def _rank_zero_text(segment: str) -> str | None:
        """The segment without its rank prefix; None if another rank printed it (metrics come from rank 0)."""
        prefix = RANK_PREFIX.match(segment)
        if not prefix:
            return segment
        if (prefix.group(1) or prefix.group(2)).strip("0"):  # not rank 0 (no int(): digits may be many)
            return None
        return segment[prefix.end():]

    def _read_progress(self, segment: str) -> bool:
        """Take step/total (and steps/s) from a tqdm bar or nbtoolkit's own progress line, if this is one."""
        # nested bars (evaluation inside training) move the cursor with ESC[A: only the outer bar is the step
        progress = TQDM.search(segment) if "/" in segment and "\x1b[" not in segment else None
        if progress:
            self._step, self._total = int(progress.group(1)), int(progress.group(2))
            if progress.group(3) != "?":
                rate = float(progress.group(3))
                self._steps_per_second = rate if progress.group(4) == "it/s" else (1 / rate if rate else None)
            return True
        own_progress = PROGRESS.search(segment) if "[nbtoolkit] step" in segment else None
        if own_progress:
            self._step, self._total = int(own_progress.group(1)), int(own_progress.group(2)) or None
            self._window = {f"{unit}_per_second": float(rate) for rate, unit in WINDOW.findall(segment)}
            return True
        return False

    def _parse_segment(self, segment: str) -> dict[str, Any] | None:
        segment = self._rank_zero_text(segment)
        if segment is None:
            return None
        self._read_progress(segment)
        values = parse_dict_line(segment)
        kind = classify(values) if values else None
        if kind is None:
            return None
        return self._record(kind, values)

    def _record(self, kind: str, values: dict[str, float]) -> dict[str, Any]:
        if kind == "train":
            self._train_records += 1
        step = self._step if self._step is not None else self._train_records
        record: dict[str, Any] = {"time": self._clock(), "step": step, "kind": kind}
        if "epoch" in values:
            record["epoch"] = values.pop("epoch")
        if self._total is not None:
            record["max_steps"] = self._total
        if kind == "train" and self._steps_per_second is not None:
            record["steps_per_second"] = round(self._steps_per_second, 4)
        if kind == "train":
            record.update(self._window)
            self._window = {}
        # NaN/inf (a diverged loss) becomes null: JSON readers elsewhere (the browser) reject NaN
        record.update({key: value if math.isfinite(value) else None for key, value in values.items()})
        return record
