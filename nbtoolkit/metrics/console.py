"""What a console shows of a job's log: one line per logging step, values as numbers.

The log keeps everything the program wrote (`--raw` shows it as is). A job of nbtoolkit's own program
(or a script whose Trainer nbtoolkit autologs) prints its `[nbtoolkit] step ...` line for each logging
step and the Trainer prints its dict too (in transformers 5 with every value a string): the console keeps
nbtoolkit's line and drops the Trainer's. Any other dict line of the Trainer (evaluation, the
end-of-training summary, a script's train lines nbtoolkit does not report) is shown as one line of
numbers in the same form.
"""

from __future__ import annotations

import math
import re

from nbtoolkit.metrics.parse import DESCRIPTION, classify, parse_dict_line

#: what nbtoolkit prints for each logging step (its program, or autolog in a script's Trainer)
STEP_LINE = "[nbtoolkit] step "
#: a key of a printed dict: `'loss':`
KEY = re.compile(r"""['"][^'"]+['"]\s*:""")


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


def trainer_dict(line: str) -> dict[str, float] | None:
    """The numbers of a line that ends in a dict of numbers only, as the Trainer prints them (after a bar or a
    collector's prefix at most); None for anything else, such as a user's `print("Config:", {...})`."""
    start = line.find("{")
    if start < 0 or not line.rstrip(" \r").endswith("}") or DESCRIPTION.search(line, 0, start):
        return None
    values = parse_dict_line(line)
    return values if values and len(KEY.findall(line, start)) == len(values) else None


class ConsoleView:
    """Feed it log text as it arrives (any chunking); it returns the text a console shows.

    Whether nbtoolkit reports each step is read from the log, not from the spec: its own program and the
    autolog of a script's Trainer both print `[nbtoolkit] step ...` on the line after the Trainer's dict.
    Until the log has shown one, a train dict waits for the next line to tell whether it is reported there.
    """

    def __init__(self) -> None:
        self._pending = ""
        self._steps_reported = False  # the log holds nbtoolkit's own line per step
        self._held: tuple[str, str] | None = None  # a train dict line: (its text before the dict, its line)

    def feed(self, text: str) -> str:
        lines = (self._pending + text).split("\n")
        self._pending = lines.pop()
        return "".join(shown + "\n" for line in lines for shown in self._line(line))

    def flush(self) -> str:
        rest, self._pending = self._pending, ""
        shown = (self._line(rest) if rest else []) + self._release(dropped=False)
        return "\n".join(shown) + ("\n" if shown and not rest else "")  # a partial last line stays partial

    def _release(self, dropped: bool) -> list[str]:
        """The held train dict's lines: its rewrite, or only the text before it when nbtoolkit reported it."""
        if self._held is None:
            return []
        (before, rewritten), self._held = self._held, None
        if dropped:
            return [before] if before.strip(" \r") else []
        return [rewritten]

    def _line(self, line: str) -> list[str]:
        if STEP_LINE in line:
            self._steps_reported = True
            return [*self._release(dropped=True), line]
        shown = self._release(dropped=False)
        values = trainer_dict(line)
        kind = classify(values) if values else None
        if values is None or kind is None:
            return [*shown, line]
        before = line[: line.find("{")]
        if kind == "train":
            self._held = (before, before + metric_line(kind, values))
            if self._steps_reported:
                shown += self._release(dropped=True)
            return shown
        return [*shown, before + metric_line(kind, values)]


def console_page(chunk: bytes, *, final: bool, more: bool) -> tuple[str, int]:
    """A page of a log read by byte offset (a panel polling it) as a console shows it, and how many of its bytes
    it used (the next page starts after them).

    While the job runs, the page ends before an unfinished last line and before a last train dict (the line
    after it may be nbtoolkit's own for the same step), so paging shows each step once. `final`: the job has
    ended and nothing follows, the page is shown whole. `more`: the log goes on past this page, so nothing is held
    back that would leave the page empty (a reader would wait on it forever).
    """
    used = chunk
    if not final:
        lines = chunk.split(b"\n")[:-1]  # the finished lines: the last piece is unfinished (or b"")
        values = trainer_dict(lines[-1].decode("utf-8", errors="replace")) if lines else None
        if values and classify(values) == "train":
            lines.pop()
        if lines or not more:
            used = b"".join(line + b"\n" for line in lines)
    view = ConsoleView()
    return view.feed(used.decode("utf-8", errors="replace")) + view.flush(), len(used)
