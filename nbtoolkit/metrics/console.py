"""What a console shows of a job's log: one line per logging step, values as numbers.

The log keeps everything the program wrote (`--raw` shows it as is). A job of nbtoolkit's own program
(or a script whose Trainer nbtoolkit autologs) prints its `[nbtoolkit] step ...` line for each logging
step and the Trainer prints its dict too (in transformers 5 with every value a string), on the line just
before or just after it: the console keeps nbtoolkit's line and drops that one dict (the one beside it, with
the same loss). Any other dict line of numbers (evaluation, the end-of-training summary, a script's train
lines nbtoolkit does not report, a user's own) is shown as one line of numbers in the same form.
"""

from __future__ import annotations

import codecs
import math
import re

from nbtoolkit.metrics.parse import (
    DESCRIPTION,
    DICT_FIRST,
    STEP_FIRST,
    STEP_LINE,
    PendingLine,
    classify,
    parse_dict_line,
    same_step,
)

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

    Whether nbtoolkit reports a step is read from the log, not from the spec: its own program prints
    `[nbtoolkit] step ...` on the line before the Trainer's dict, the autolog of a script's Trainer on the line
    after it; which, is read once, at the first step line. Until then, and in autolog's order, a train dict
    waits for the next line to tell.
    """

    def __init__(self) -> None:
        self._pending = PendingLine()
        self._held: tuple[str, str, dict[str, float]] | None = None  # a train dict: (text before it, its line, values)
        self._unpaired_step: str | None = None  # the last line, if a step line whose dict may come next
        self._order: str | None = None  # STEP_FIRST or DICT_FIRST, from the first step line
        self._settled: dict[str, float] | None = None  # the train dict `settle` showed, if no line came since

    def feed(self, text: str) -> str:
        lines = self._pending.lines(text)
        if self._pending.too_long:  # a bar redrawn with \r for hours: only its last drawing will show
            self._pending.cut_drawings()
        return "".join(shown + "\n" for line in lines for shown in self._line(line))

    def settle(self) -> str:
        """The log has been quiet for SETTLE_S: a held train dict has no step line coming, so it shows now (its
        values stay to tell the log's order if its step line comes all the same)."""
        if self._held:
            self._settled = self._held[2]
        return "".join(line + "\n" for line in self._release(dropped=False))

    def resume(self, previous: str, order: str | None) -> None:
        """A view that starts mid-log (a page): the log's line just before it and its order as far as known, so a
        dict and its step line that the page's start split pair as they would in one view."""
        self._order = order
        values = trainer_dict(previous)
        if values and classify(values) == "train":
            self._settled = values  # shown by the page before it
        elif STEP_LINE in previous and order == STEP_FIRST:
            self._unpaired_step = previous

    def flush(self) -> str:
        rest = self._pending.take()
        shown = (self._line(rest) if rest else []) + self._release(dropped=False)
        return "\n".join(shown) + ("\n" if shown and not rest else "")  # a partial last line stays partial

    def _release(self, dropped: bool) -> list[str]:
        """The held train dict's lines: its rewrite, or only the text before it when nbtoolkit reported it."""
        if self._held is None:
            return []
        (before, rewritten, _), self._held = self._held, None
        if dropped:
            return [before] if before.strip(" \r") else []
        return [rewritten]

    def _line(self, line: str) -> list[str]:
        settled, self._settled = self._settled, None
        if STEP_LINE in line:
            held = self._held[2] if self._held else settled
            if self._order is None:
                self._order = DICT_FIRST if held and same_step(line, held) else STEP_FIRST
            paired = self._order == DICT_FIRST and held is not None and same_step(line, held)
            self._unpaired_step = line if self._order == STEP_FIRST else None
            return [*self._release(dropped=paired), line]
        shown = self._release(dropped=False)
        step_line, self._unpaired_step = self._unpaired_step, None
        values = trainer_dict(line)
        kind = classify(values) if values else None
        if values is None or kind is None:
            return [*shown, line]
        before = line[: line.find("{")]
        rewritten = before + metric_line(kind, values)
        if kind != "train":
            return [*shown, rewritten]
        if step_line and same_step(step_line, values):  # the dict of the step line just before it
            return [*shown, before] if before.strip(" \r") else shown
        if self._order == STEP_FIRST:  # no step line after it will claim it
            return [*shown, rewritten]
        self._held = (before, rewritten, values)
        return shown


def console_page(
    chunk: bytes, *, final: bool, more: bool, settled: bool = False, previous: bytes = b"", order: str | None = None
) -> tuple[str, int]:
    """A page of a log read by byte offset (a panel polling it) as a console shows it, and how many of its bytes
    it used (the next page starts after them).

    While the job runs, the page ends before an unfinished last line and before a last train dict or step line
    whose other half may follow (in the log's order), so paging shows each step once.
    `final`: the job has ended and nothing follows, the page is shown whole. `more`: the log goes on past this page,
    so nothing is held back that would leave the page empty (a reader would wait on it forever): a line longer than
    the page is cut at its last `\r` in it (a bar's drawing), else at a character's end. `settled`: the log ends here
    and has been quiet for SETTLE_S, so a last train dict has no step line coming and shows (an unfinished line, or a
    step line whose dict may follow, still waits). `previous`: the log's line before the page, and `order` the log's
    (`log_order`; else read from the page), so that a pair the page's start split is read as one.
    """
    before = previous.decode("utf-8", errors="replace")
    finished = chunk.split(b"\n")[:-1]  # the last piece is unfinished (or b"")
    order = order or _page_order([line.decode("utf-8", errors="replace") for line in finished])
    used = chunk
    if not final:
        # a page too short for the pair shows its half rather than nothing (a reader would wait on it forever)
        lines = _without_a_half_pair(finished, order, settled) or (finished if more else [])
        if lines or not more:
            used = b"".join(line + b"\n" for line in lines)
        else:
            used = _cut_long_line(chunk)
    view = ConsoleView()
    view.resume(before, order)
    return view.feed(used.decode("utf-8", errors="replace")) + view.flush(), len(used)


def _cut_long_line(chunk: bytes) -> bytes:
    """A line longer than the page, cut at its last `\r` in it (a bar's drawing), else at a character's end."""
    cut = chunk.rfind(b"\r")
    if cut > 0:
        return chunk[:cut]
    whole = codecs.getincrementaldecoder("utf-8")("surrogateescape").decode(chunk)  # holds back a cut character
    return chunk[: len(whole.encode("utf-8", "surrogateescape"))] or chunk


def log_order(head: bytes) -> str | None:
    """The log's order of step line and dict, read as the parser reads it: at its first step line, from the line
    before it (None: no whole step line in `head`, the log's first bytes)."""
    at = head.find(STEP_LINE.encode())
    end = head.find(b"\n", at)
    if at < 0 or end < 0:
        return None
    start = head.rfind(b"\n", 0, at) + 1
    previous = head[head.rfind(b"\n", 0, start - 1) + 1 : start - 1] if start else b""
    return _pair_order(head[start:end].decode("utf-8", errors="replace"), previous.decode("utf-8", errors="replace"))


def _page_order(lines: list[str]) -> str | None:
    """The order read from the first step line of a page (None: none in it), when the log's own is not known."""
    for index, line in enumerate(lines):
        if STEP_LINE in line:
            return _pair_order(line, lines[index - 1] if index else "")
    return None


def _pair_order(step_line: str, previous: str) -> str:
    """DICT_FIRST if the line before a log's first step line is its train dict, else STEP_FIRST."""
    values = trainer_dict(previous)
    paired = values is not None and classify(values) == "train" and same_step(step_line, values)
    return DICT_FIRST if paired else STEP_FIRST


def _without_a_half_pair(lines: list[bytes], order: str | None, settled: bool) -> list[bytes]:
    """The lines, less a last train dict (autolog: its step line may follow, unless the log has `settled`) or step
    line (nbtoolkit's program: its dict may follow) whose other half may still come."""
    if not lines:
        return lines
    last = lines[-1].decode("utf-8", errors="replace")
    if STEP_LINE in last:
        return lines[:-1] if order == STEP_FIRST else lines
    values = trainer_dict(last)
    if values and classify(values) == "train" and order != STEP_FIRST and not settled:
        return lines[:-1]
    return lines
