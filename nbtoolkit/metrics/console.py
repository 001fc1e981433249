"""What a console shows of a job's log: one line per logging step, values as numbers.

The log keeps everything the program wrote (`--raw` shows it as is). A job of nbtoolkit's own program
prints its `[nbtoolkit] step ...` line for each logging step and the Trainer prints its dict too (in
transformers 5 with every value a string): the console keeps nbtoolkit's line and drops the Trainer's.
Any other dict line of the Trainer (evaluation, the end-of-training summary, every line of a script of
the user's) is shown as one line of numbers in the same form.
"""

from __future__ import annotations

import math

from nbtoolkit.metrics.parse import classify, parse_dict_line


def number(value: float) -> str:
    if not math.isfinite(value):  # a diverged run's nan/inf, shown as the Trainer wrote it
        return str(value)
    return str(int(value)) if value == int(value) and abs(value) < 1e15 else f"{value:.4g}"


def metric_line(kind: str, values: dict[str, float]) -> str:
    """`[nbtoolkit] eval at epoch 0.5 | eval_loss 1.808 | eval_accuracy 0.1625`"""
    values = dict(values)
    epoch = values.pop("epoch", None)
    head = f"[nbtoolkit] {kind}" + (f" at epoch {number(epoch)}" if epoch is not None else "")
    return " | ".join([head, *(f"{key} {number(value)}" for key, value in values.items())])


class ConsoleView:
    """Feed it log text as it arrives (any chunking); it returns the text a console shows."""

    def __init__(self, own_program: bool) -> None:
        self.own_program = own_program  # nbtoolkit's training program, which prints its own line per step
        self._pending = ""

    def feed(self, text: str) -> str:
        lines = (self._pending + text).split("\n")
        self._pending = lines.pop()
        return "".join(shown + "\n" for shown in map(self._line, lines) if shown is not None)

    def flush(self) -> str:
        rest, self._pending = self._pending, ""
        shown = self._line(rest) if rest else None
        return shown or ""

    def _line(self, line: str) -> str | None:
        values = parse_dict_line(line) if "{" in line else None
        kind = classify(values) if values else None
        if values is None or kind is None:
            return line
        before = line[: line.find("{")]
        if kind == "train" and self.own_program:  # nbtoolkit's own line says it, with numbers
            return before if before.strip(" \r") else None
        return before + metric_line(kind, values)
