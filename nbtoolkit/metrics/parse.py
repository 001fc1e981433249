"""Log lines -> metric records, for programs that write no metrics.jsonl themselves.

Understands the dict lines the HF Trainer prints (float values in transformers 4, string
values in transformers 5), the final `train_runtime` line, eval lines, `[rankN]:` /
`[defaultN]:` prefixes from torchrun (also two ranks glued on one line), and the training
bar of tqdm or nbtoolkit's own `[nbtoolkit] step N/M` lines (which give the step and total).
The bar is read in every rendering: a terminal's (`\r`, bar glyphs), one written without a
terminal as Colab, Kubernetes and CloudWatch keep it (`  4% 100/2238 [1:49:59<42:08:58, 70.97s/it]`),
behind a host, pod or time prefix, with a dict glued to its end. A console's text (`nbtoolkit logs`,
`run --follow`: a step line with no Trainer dict beside it, `[nbtoolkit] eval at epoch ...` lines) gives
the raw log's records: each train record's step, loss, learning rate and throughput (the Trainer's other
train numbers, such as grad_norm, are only in the raw log), eval and summary records whole. Other bars (evaluation, saving,
data processing) never set the step; a record with no step in sight has step null rather than a
guess. Scripts run under nbtoolkit with a Trainer write exact records
themselves (nbtoolkit.train.autolog): this parser is the fallback for everything else.
Never raises on odd input: a log is whatever a program happened to print.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable
from typing import Any

from nbtoolkit.metrics import budget

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
TQDM = re.compile(r"(?<!\d)(\d{1,15})/(\d{1,15}) \[([\d:]{1,20})<[\d:?]+,\s*(\d+(?:\.\d*)?|\?)(it/s|s/it)")
# nbtoolkit.train's own progress line (its log has no tqdm), printed just before the Trainer's dict
# line: the step, and the logging window's throughput (evaluation and checkpoint time left out)
PROGRESS = re.compile(r"\[nbtoolkit\] step (\d{1,15})/(\d{1,15})\b")
LIST_OF_DICTS = re.compile(r"\[\s*\{|\}\s*,\s*\{")
#: what precedes the count in a bar, at the end of the text before it: the percentage with or without the bar
#: glyphs (a terminal's `4%|▍   | `, a log file's `  4% `), or nothing
BAR_LEAD = re.compile(r"(?:\d{1,3}%\s*(?:\|[^|]*\|)?\s*)?$")
#: a bar's description (`Map: `, `Evaluating: `, `Loading checkpoint shards: `) ends the text before its lead; the
#: Trainer's training bar has none. Anything else before a bar (`pod-0 | `, `trainer-0 main `) is a collector's.
DESCRIPTION = re.compile(r"[A-Za-z][^:|\]]*:\s*$")
#: what a log collector or launcher puts before a line, stripped before a description is looked for: a time
#: (`2024-05-01T10:00:00.123Z`, `[2024-05-01 10:00:00,1]`), a bracketed source (`[pod/trainer-0/main]`,
#: `[1,mpirank:0,algo-1]<stderr>:`), a host or pod with a digit in its name (`worker-0:`, `algo-1:`, `10.0.0.1:`,
#: `0:`), `localhost:` or logging's `INFO:root:`; never a bar's description (`Map:`, `Evaluating:`: no digit)
LINE_PREFIX = re.compile(
    r"(?:\s*(?:\d{4}-\d\d-\d\d[T ][\d:.,]+Z?|\[[^\]]*\](?:<std(?:out|err)>)?:?"
    r"|(?:[\w.-]*\d[\w.-]*|localhost):(?=\s)|(?:DEBUG|INFO|WARNING|ERROR|CRITICAL):[\w.]*:))*"
)
#: steps/s at or under which tqdm draws every step (it redraws at most every 0.1 s): the bar drawn before a dict is exact
EVERY_STEP_DRAWN = 10.0
#: an unfinished line longer than this is read up to its last `\r` (a bar redrawn for hours without a newline)
MAX_PENDING_CHARS = 256 * 1024
#: seconds a log stays quiet before a held half pair (a train dict whose step line may follow) is taken as whole:
#: twice the SageMaker follower's 5-s poll, so the two lines of a pair that one fetch split still meet
SETTLE_S = 10.0
#: where a second rank's output starts inside a line (two ranks wrote at once)
RANK_SPLIT = re.compile(r"(?<=.)(?=\[(?:rank|default)\d+\]:)")
WINDOW = re.compile(r"\| (\d{1,15}(?:\.\d{0,15})?) (samples|tokens)/s")
#: what every line nbtoolkit writes into a job's log starts with
OWN_LINE = "[nbtoolkit] "
#: what nbtoolkit prints for each logging step (its program, or autolog in a script's Trainer)
STEP_LINE = "[nbtoolkit] step "
#: the numbers on a step line: `| loss 1.5320 | reward 0.2500 | lr 4.00e-05` (reward: a grpo run's)
STEP_VALUES = re.compile(rf"\| (loss|reward|lr) ({NUMBER})(?= \||\s*$)")
#: the loss on a step line
STEP_LOSS = re.compile(r"\| loss (\S+)")
#: where a step line stands to the Trainer's dict of its step: nbtoolkit's program prints it just before the dict,
#: autolog (a script's Trainer) just after; a log's order is read once, at its first step line
STEP_FIRST, DICT_FIRST = "step line first", "dict first"
#: a dict line as the console shows it (nbtoolkit.metrics.console): `[nbtoolkit] eval at epoch 0.5 | eval_loss 1.8`
CONSOLE_LINE = re.compile(rf"\[nbtoolkit\] (train|eval|summary)(?: at epoch ({NUMBER}))?((?: \| [\w./-]+ \S+)+)\s*$")
CONSOLE_PAIR = re.compile(rf" \| ([\w./-]+) ({NUMBER})(?= \||\s*$)")


def same_step(step_line: str, values: dict[str, float]) -> bool:
    """Whether a train dict beside a step line is the Trainer's for that step: their losses agree to the step
    line's rounding (four decimals against the Trainer's four digits); without a loss on either, being beside it
    is enough."""
    found, loss = STEP_LOSS.search(step_line), values.get("loss")
    try:
        shown = float(found.group(1)) if found else None
    except ValueError:
        shown = None
    if shown is None or loss is None:
        return True
    if not (math.isfinite(shown) and math.isfinite(loss)):
        return str(shown) == str(loss)
    return math.isclose(shown, loss, rel_tol=1e-3, abs_tol=1e-4)


def _seconds(elapsed: str) -> int:
    """tqdm's elapsed time (`05:03`, `1:49:59`) in seconds."""
    seconds = 0
    for part in elapsed.split(":"):
        seconds = seconds * 60 + int(part or 0)
    return seconds


def parse_dict_line(line: str) -> dict[str, float] | None:
    """The numbers of a Trainer-style dict line, or None if the line is not one (or holds a list of
    dicts, such as a printed `trainer.state.log_history`: one record each would mix train and eval)."""
    start = line.find("{")
    if start < 0 or line.rfind("}") < start or LIST_OF_DICTS.search(line):
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


class PendingLine:
    """The text since the last line end, kept as it came and joined once: when a line end arrives, or when it grows
    past MAX_PENDING_CHARS (a bar redrawn with `\r` for hours, no newline) and its owner cuts it at its last `\r`."""

    def __init__(self) -> None:
        self._parts: list[str] = []
        self.chars = 0
        self._look_at = MAX_PENDING_CHARS

    def lines(self, text: str) -> list[str]:
        """The lines `text` ends; the rest is kept."""
        if "\n" not in text:
            self._parts.append(text)
            self.chars += len(text)
            return []
        lines = self.take(text).split("\n")
        self._keep(lines.pop())
        return lines

    @property
    def too_long(self) -> bool:
        return self.chars > self._look_at

    def cut_drawings(self, prefix: re.Pattern[str] | None = None) -> str:
        """The line up to its last `\r` (its earlier drawings); what follows stays, behind what `prefix` matches at
        the line's start. A line with no `\r` gives "" and is looked at again once it has doubled (each look joins
        it whole)."""
        line = self.take()
        cut = line.rfind("\r")
        if cut <= 0:
            self._keep(line)
            self._look_at = 2 * len(line)
            return ""
        kept = prefix.match(line) if prefix else None
        self._keep((kept.group(0) if kept else "") + line[cut:])
        return line[:cut]

    def take(self, text: str = "") -> str:
        """Everything kept, and `text`; nothing is kept after."""
        line = "".join([*self._parts, text])
        self._parts, self.chars, self._look_at = [], 0, MAX_PENDING_CHARS
        return line

    def _keep(self, text: str) -> None:
        self._parts, self.chars = [text], len(text)


class LogParser:
    """Feed it text as it arrives; it returns the metric records found in complete lines.

    Keeps state across calls: a partial last line, the training bar's step/total, and a record
    waiting for the bar's next refresh. The Trainer prints its dict lines with `tqdm.write`, which
    clears the bar, prints, and redraws the bar at the current step: the bar drawn before a dict
    may be several steps stale (tqdm redraws at most every 0.1 s), the one redrawn after it is exact.
    """

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._pending = PendingLine()
        self._step: int | None = None
        self._total: int | None = None
        self._steps_per_second: float | None = None
        self._window: dict[str, float] = {}
        self._waiting: dict[str, Any] | None = None  # a record whose step the next training bar settles
        self._step_from_bar = False  # False: from nbtoolkit's own line, printed just before its dict (exact)
        self._confirmed = False  # the bar held is the training bar: a train record was printed under it
        self._two_bars = False  # bars of two totals were drawn before the training bar was confirmed
        self._bar_fresh = False  # the bar was drawn since the last train record took its step from it
        self._bar_seconds = 0  # the training bar's elapsed time when last drawn (it never goes back)
        # a bar of the training bar's total drawn since, that began again (an evaluation's, or a resumed run's):
        # (its step, its elapsed seconds) when last drawn, and whether it was the last bar drawn
        self._restarted: tuple[int, int] | None = None
        self._restart_drawn_last = False
        # a console's text has nbtoolkit's step lines and no Trainer dict beside them: a step line's own record waits
        # for the next line (the dict of its step, when there is one, gives the record instead)
        self._step_record: tuple[str, dict[str, Any]] | None = None
        self._last_train: dict[str, float] | None = None  # the previous line's train dict, if it was one
        # a train dict's record no bar gave a step: in autolog's order the next line, its step line, names the step
        # (record, the dict's values)
        self._dict_record: tuple[dict[str, Any], dict[str, float]] | None = None
        self._order: str | None = None  # STEP_FIRST or DICT_FIRST, once a step line was seen

    def feed(self, text: str) -> list[dict[str, Any]]:
        """Parse newly arrived text (any chunking); return new records. Text without a line end costs nothing but
        keeping it; a line that grows past MAX_PENDING_CHARS (a bar redrawn with `\r` for hours, no newline) is
        read up to its last `\r`, so a run's whole output is read once, whatever its chunks."""
        lines = self._pending.lines(text)
        if self._pending.too_long:  # read up to its last \r; what follows is still a rank's if it was one
            lines += filter(None, [self._pending.cut_drawings(prefix=RANK_PREFIX)])
        return [record for line in lines for record in self._parse_complete_line(line)]

    def flush(self) -> list[dict[str, Any]]:
        """Parse what is left of an unterminated last line (at the end of a log)."""
        rest = self._pending.take()
        records = self.feed(rest + "\n") if rest else []
        held, self._step_record = self._step_record, None
        held_dict, self._dict_record = self._dict_record, None
        return records + ([held_dict[0]] if held_dict else []) + self._release() + ([held[1]] if held else [])

    def settle(self) -> list[dict[str, Any]]:
        """No text came for a while (the caller's measure): a train dict held for the step line that autolog's
        order prints right after it has none coming, so its record is ready as it is. Without this, a log with
        no bars and no step lines (a script with `disable_tqdm`) shows each logging step only when the next comes.
        A step line that still comes later pairs with the dict and adds nothing."""
        held, self._dict_record = self._dict_record, None
        return [held[0]] if held else []

    def _parse_complete_line(self, line: str) -> list[dict[str, Any]]:
        glued = "]:" in line and RANK_SPLIT.search(line)  # `[rank1]: ...[rank0]:{...}`: two ranks on one line
        records: list[dict[str, Any]] = []
        for piece in RANK_SPLIT.split(line) if glued else (line,):
            records += self._parse_line(piece)
        return records

    def _parse_line(self, line: str) -> list[dict[str, Any]]:
        """A line is progress-bar updates separated by \\r, some ending in a dict. A record whose step came
        from the training bar waits for the bar's next drawing; any other is ready at once."""
        rank_zero = self._rank_zero_text(line)
        if rank_zero is None or self._is_own_message(rank_zero):
            return []
        held, self._step_record = self._step_record, None
        held_dict, self._dict_record = self._dict_record, None
        last_train, self._last_train = self._last_train, None
        values = parse_dict_line(rank_zero) if "{" in rank_zero else None
        train = values if values and classify(values) == "train" else None
        step_line = PROGRESS.search(rank_zero) if STEP_LINE in rank_zero else None
        previous = held_dict[1] if held_dict else last_train  # the train dict just before, if any
        if step_line and self._order is None:
            self._order = DICT_FIRST if previous and same_step(rank_zero, previous) else STEP_FIRST
        paired_back = bool(step_line and self._order == DICT_FIRST and previous and same_step(rank_zero, previous))
        records = []
        if held_dict:
            records.append(self._with_step_of(step_line, held_dict[0]) if step_line and paired_back else held_dict[0])
        after_its_step_line = bool(held and train and same_step(held[0], train))  # only held in STEP_FIRST order
        if held and not after_its_step_line:
            records.append(held[1])
        if budget.LOG_MARK in rank_zero:  # train.budget_usd's line: its record, from a program whose own stays remote
            found = budget.from_log_line(rank_zero, self._clock())
            return records + ([found] if found else [])
        console = CONSOLE_LINE.search(rank_zero) if OWN_LINE in rank_zero else None
        if console:
            return records + self._console_record(console)
        parsed = self._parse_bars_and_dicts(rank_zero)
        last_is_train = bool(parsed) and parsed[-1]["kind"] == "train"
        may_be_followed = self._order != STEP_FIRST and not self._step_from_bar  # no bar gave it its step
        if train and "step" not in train and may_be_followed and not after_its_step_line and last_is_train:
            self._dict_record = (parsed.pop(), train)  # autolog's order: its step line may come next
        records += parsed
        self._last_train = train
        if step_line and not paired_back:  # a console's text, or a step line whose dict comes next
            record = self._step_line_record(rank_zero)
            if self._order == STEP_FIRST:
                self._step_record = (rank_zero, record)
            else:
                records.append(record)
        return records

    @staticmethod
    def _is_own_message(rank_zero: str) -> bool:
        """A line nbtoolkit writes that holds no metric (a follower's remote status, a warning, the supervisor's
        timed notes): it passes without parting a step line from the Trainer's dict of that step, which a remote
        job's status can land between."""
        return (
            rank_zero.startswith(OWN_LINE)
            and not rank_zero.startswith((STEP_LINE, budget.LOG_MARK))
            and not CONSOLE_LINE.search(rank_zero)
        )

    @staticmethod
    def _with_step_of(step_line: re.Match[str], record: dict[str, Any]) -> dict[str, Any]:
        """The held dict's record, with the step of the step line printed after it (autolog's order)."""
        record["step"] = int(step_line.group(1))
        if int(step_line.group(2)):
            record["max_steps"] = int(step_line.group(2))
        return record

    def _console_record(self, line: re.Match[str]) -> list[dict[str, Any]]:
        """A dict line as a console shows it, read back into its record."""
        kind, epoch, pairs = line.groups()
        values = {key: float(value) for key, value in CONSOLE_PAIR.findall(pairs)}
        if epoch is not None:
            values["epoch"] = float(epoch)
        return [self._record(kind, values)] if values else []

    def _step_line_record(self, line: str) -> dict[str, Any]:
        """The train record of a step line alone (loss, learning rate, the window's throughput); the window stays
        for the Trainer's dict that may follow."""
        values = {"learning_rate" if key == "lr" else key: float(value) for key, value in STEP_VALUES.findall(line)}
        record: dict[str, Any] = {"time": self._clock(), "step": self._step, "kind": "train", **self._window}
        if self._total is not None:
            record["max_steps"] = self._total
        record.update({key: value if math.isfinite(value) else None for key, value in values.items()})
        return record

    def _parse_bars_and_dicts(self, rank_zero: str) -> list[dict[str, Any]]:
        records: list[dict[str, Any]] = []
        segments = rank_zero.split("\r")
        since_record = 0
        for index, segment in enumerate(segments):
            if "{" in segment:
                records += self._read_bars(segments[since_record:index]) + self._release()
                record, settled = self._parse_segment(segment)
                if record is not None and settled:
                    records.append(record)
                elif record is not None:
                    self._waiting = record
                since_record = index + 1
        return records + self._read_bars(segments[since_record:])

    def _read_bars(self, segments: list[str]) -> list[dict[str, Any]]:
        """Of the bar drawings between two records (one per step is most of a log) only two matter: the first
        training bar settles a waiting record, the last is where training stands."""
        released = []
        if self._waiting is not None:
            first = next((index for index, segment in enumerate(segments) if self._read_progress(segment)), None)
            if first is None:
                return []
            released, segments = self._release(), segments[first + 1 :]
        for segment in reversed(segments):
            if self._read_progress(segment):
                break
        return released

    def _release(self) -> list[dict[str, Any]]:
        """The waiting record, with the training bar's latest step (never earlier than when it was printed); one
        that waited with no step keeps none unless a bar was drawn after it (a log that ends shows no later step)."""
        record, self._waiting = self._waiting, None
        if record is None:
            return []
        if record["step"] is not None or self._bar_fresh:  # a stepless one only takes a bar drawn after it
            record["step"] = max(record["step"] or 0, self._step or 0)
        self._bar_fresh = False
        if self._total is not None:
            record["max_steps"] = self._total
        return [record]

    @staticmethod
    def _rank_zero_text(segment: str) -> str | None:
        """The segment without its rank prefix; None if another rank printed it (metrics come from rank 0)."""
        prefix = RANK_PREFIX.match(segment)
        if not prefix:
            return segment
        if (prefix.group(1) or prefix.group(2)).strip("0"):  # not rank 0 (no int(): digits may be many)
            return None
        return segment[prefix.end() :]

    def _read_progress(self, segment: str) -> bool:
        """Take step/total (and steps/s) from the training bar or nbtoolkit's own progress line, if this is one."""
        # nested bars (evaluation inside training) move the cursor with ESC[A: only the outer bar is the step
        progress = TQDM.search(segment) if "/" in segment and "\x1b[" not in segment else None
        if progress:
            step, total, elapsed, rate, unit = progress.groups()
            step, total, seconds = int(step), int(total), _seconds(elapsed)
            if self._is_training_bar(segment[: progress.start()], step, total, seconds):
                self._step, self._total, self._step_from_bar, self._bar_fresh = step, total, True, True
                self._bar_seconds = seconds
                if rate != "?":
                    rate = float(rate)
                    self._steps_per_second = rate if unit == "it/s" else (1 / rate if rate else None)
                return True
        own_progress = PROGRESS.search(segment) if "[nbtoolkit] step" in segment else None
        if own_progress:
            self._step, self._total = int(own_progress.group(1)), int(own_progress.group(2)) or None
            self._step_from_bar = False
            self._window = {f"{unit}_per_second": float(rate) for rate, unit in WINDOW.findall(segment)}
            return True
        return False

    def _is_training_bar(self, before: str, step: int, total: int, seconds: int) -> bool:
        """The Trainer's training bar has no description (`Map:`, `Writing model shards:` have one). Once a train
        record was printed under it, it keeps its total and never goes back, in step or in elapsed time; until then
        the latest bar without a description is the candidate. A bar of the same total that went back began again
        (an evaluation's bar, whose count may pass the training step, or a resumed run's): its later drawings are
        told from the training bar's by continuing it, and are not the step until a train record is printed under
        one (a resumed run) or an eval record ends it."""
        prefix = LINE_PREFIX.match(before).end()  # type: ignore[union-attr]  # `(...)*` matches every text
        lead = BAR_LEAD.search(before, prefix).start()  # type: ignore[union-attr]  # matches at the end at least
        if DESCRIPTION.search(before, prefix, lead):
            return False
        if self._total is None or not self._confirmed:
            self._two_bars = self._two_bars or (self._total is not None and total != self._total)
            return True
        if total != self._total:
            return False
        training = self._step or 0
        ahead = step >= training and seconds >= self._bar_seconds
        restarted = self._restarted
        continues_restart = restarted is not None and step >= restarted[0] and seconds >= restarted[1]
        if ahead and not continues_restart:  # a bar that began again stays apart until a record settles it
            self._restart_drawn_last = False
            return True
        self._restarted, self._restart_drawn_last = (step, seconds), True
        return False

    def _bar_step_stands_for(self, kind: str) -> bool:
        """Whether the bar held gives this record its step. A train dict is printed under the training bar. An eval
        dict comes after the evaluation's own bar has run to its end: a complete bar that no train record has
        shown to be the training bar may be that one (an eval-only log), so it gives no step; nor does any bar once
        two of different totals were drawn before one was confirmed (the latest may be an evaluation's)."""
        if kind == "train" or self._confirmed:
            return True
        return not self._two_bars and (self._step or 0) < (self._total or 0)

    def _parse_segment(self, segment: str) -> tuple[dict[str, Any] | None, bool]:
        """The segment's record, if any, and whether its step is settled (else the next training bar settles it)."""
        before = segment[: segment.find("{")]
        if "/" in before:  # a bar or nbtoolkit's line glued before the dict
            self._read_progress(before)
        values = parse_dict_line(segment)
        kind = classify(values) if values else None
        if values is None or kind is None:
            return None, True
        if kind == "eval" and self._restarted is not None:
            if self._restarted[0] < (self._total or 0):  # not an evaluation's bar run to its end: a resumed run's?
                return {**self._record(kind, values), "step": None}, True
            self._restarted = None  # an evaluation's bar, drawn again from its start, has run to its end
        elif kind == "train" and self._restarted is not None and self._restart_drawn_last:
            # printed under the bar that began again: a resumed run's training bar, now the step
            (self._step, self._bar_seconds), self._restarted = self._restarted, None
            self._restart_drawn_last, self._step_from_bar, self._bar_fresh = False, True, True
        own_step = values.pop("step", None)  # a custom loop's own count: the truth, as a whole number
        if own_step is not None and math.isfinite(own_step) and own_step == int(own_step):
            return {**self._record(kind, values), "step": int(own_step)}, True
        if self._step_from_bar and not self._bar_step_stands_for(kind):
            record = self._record(kind, values)
            record["step"] = None
            record.pop("max_steps", None)
            return record, True
        if self._step_from_bar and kind == "train":
            if not self._bar_fresh:  # a second train dict under the same drawing: only a later bar gives its step
                return {**self._record(kind, values), "step": None}, False
            self._confirmed, self._bar_fresh = True, False
        # a bar drawn at every step (slow steps, or a log file's line per step) was exact when the dict came
        drawn_every_step = self._steps_per_second is not None and self._steps_per_second <= EVERY_STEP_DRAWN
        return self._record(kind, values), self._step is None or not self._step_from_bar or drawn_every_step

    def _record(self, kind: str, values: dict[str, float]) -> dict[str, Any]:
        record: dict[str, Any] = {"time": self._clock(), "step": self._step, "kind": kind}
        if "epoch" in values:
            record["epoch"] = values.pop("epoch")
        if self._total is not None:
            record["max_steps"] = self._total
        if kind == "train" and self._steps_per_second is not None:
            record["steps_per_second"] = round(self._steps_per_second, 4)
        if kind == "train":
            record.update(self._window)
            self._window = {}
        if kind == "summary" and "train_samples_per_second" in values:
            record["samples_per_second"] = values["train_samples_per_second"]
        # NaN/inf (a diverged loss) becomes null: JSON readers elsewhere (the browser) reject NaN
        record.update({key: value if math.isfinite(value) else None for key, value in values.items()})
        return record
