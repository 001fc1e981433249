"""The health of a running job from its ranks' heartbeats: ok, slow (a straggler), stalled, or unknown.

Rules (pure: `assess` takes the heartbeats, the clock and which processes live):
- stalled: no rank has finished a step for max(floor, 10 x the median step time) while a process of the
  job lives. The floor is 60 s (`NBTOOLKIT_STALL_FLOOR_S` changes it: tests use a few seconds), so a
  slow first step, an evaluation or a checkpoint save is not a stall; 10 steps' time covers runs whose
  steps take minutes.
- slow: a rank's step time is over `SLOW_RATIO` (1.5) times the median of the other ranks' and at
  least `SLOW_MIN_S` (10 ms) more, so the jitter of millisecond steps is no straggler. Ranks that meet in
  a collective every step wait for the slowest and all show its pace: there the straggler is seen
  only when it falls behind by whole steps (a rank whose last step is older than the stall limit while
  the others go on).
- unknown: the job is not running, or no rank has reported yet (a script without nbtoolkit's callback,
  autolog or `nbtoolkit.log`, a remote engine).

Beside the processes, what the numbers say (`TrainingSigns`, folded from the train records of metrics.jsonl):
the loss, the evaluation loss or a reward NaN or infinite, the gradient norm 0 or the loss or reward unchanged for `FLAT_STEPS`
logging steps in a row, or a GRPO run with no reward series. Each is a state of the latest records: a loss
that moves again is no longer one. A process can be ok while its run learns nothing (a reward of 0/0).
"""

from __future__ import annotations

import functools
import math
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import psutil

from nbtoolkit.metrics.rewards import TOTAL
from nbtoolkit.ranks.heartbeat import read_heartbeats
from nbtoolkit.runner.store import JobRecord, JobStore, this_host
from nbtoolkit.tasks import TASKS

STALL_FLOOR_ENV, STALL_FLOOR_S = "NBTOOLKIT_STALL_FLOOR_S", 60.0
STALL_STEPS = 10
SLOW_RATIO, SLOW_MIN_S = 1.5, 0.01
STATES = ("ok", "slow", "stalled", "unknown")
#: logging steps a gradient norm of 0, or a loss or reward that does not change, must last to count: a blip
#: (a sparse reward at 0 for a step or two) is not one; a NaN counts at once
FLAT_STEPS = 5
#: the job row's info key the supervisor keeps the training anomalies in (`TrainingSigns.summary`)
TRAINING_KEY = "training"
LOSS, GRAD_NORM, MARGIN, EVAL_LOSS = "loss", "grad_norm", "rewards/margins", "eval_loss"


class DoctorError(RuntimeError):
    """An action on a running job that cannot be done (stacks, checkpoint now); the message says why."""


@dataclass
class RankHealth:
    rank: int
    step: int | None
    last_step_ago: float | None
    step_time: float | None
    host: str | None
    pid: int | None
    memory_mb: float | None
    memory_kind: str | None
    #: whether its process lives (None: it runs on another host, not looked at from here)
    alive: bool | None
    slow: bool = False
    stalled: bool = False


@dataclass
class Health:
    state: str
    reason: str
    ranks: list[RankHealth] = field(default_factory=list)
    #: seconds without a step after which the job counts as stalled (None without heartbeats)
    stall_after_s: float | None = None
    #: what the numbers say, one sentence each (empty: nothing wrong seen)
    training: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def stall_floor() -> float:
    """NBTOOLKIT_STALL_FLOOR_S if it is a finite number of seconds above 0, else 60 (with one warning line)."""
    return parse_stall_floor(os.environ.get(STALL_FLOOR_ENV) or "")


@functools.cache
def parse_stall_floor(text: str) -> float:
    try:
        floor = float(text) if text else STALL_FLOOR_S
    except ValueError:
        floor = math.nan
    if math.isfinite(floor) and floor > 0:
        return floor
    print(
        f"nbtoolkit: {STALL_FLOOR_ENV}={text[:40]!r} is not a number of seconds above 0; "
        f"the stall floor stays {STALL_FLOOR_S:.0f} s",
        file=sys.stderr,
    )
    return STALL_FLOOR_S


def _ranks_text(ranks: list[RankHealth]) -> str:
    return ", ".join(f"rank {r.rank} at step {r.step}" for r in sorted(ranks, key=lambda r: (r.step or 0, r.rank)))


def assess(
    beats: list[dict[str, Any]], now: float, alive: dict[int, bool | None], *, active: bool = True, floor_s: float
) -> Health:
    """The job's health from its ranks' last heartbeats at time `now`; `alive`: rank -> its process lives."""
    step_times = [b["step_time"] for b in beats if isinstance(b.get("step_time"), (int, float))]
    median = statistics.median(step_times) if step_times else None
    limit = max(floor_s, STALL_STEPS * median) if median else floor_s
    ranks = [
        RankHealth(
            rank=b["rank"],
            step=b.get("step"),
            last_step_ago=round(max(0.0, now - b["time"]), 3) if isinstance(b.get("time"), (int, float)) else None,
            step_time=b.get("step_time"),
            host=b.get("host"),
            pid=b.get("pid"),
            memory_mb=b.get("memory_mb"),
            memory_kind=b.get("memory_kind"),
            alive=alive.get(b["rank"]),
        )
        for b in beats
    ]
    if not active:
        return Health("unknown", "the job is not running; the ranks as they last reported", ranks, limit)
    if not ranks:
        return Health(
            "unknown",
            "no rank has reported a step yet (heartbeats come from nbtoolkit's training program, "
            "autolog in Trainer scripts and nbtoolkit.log in custom loops)",
        )
    for r in ranks:
        r.stalled = r.last_step_ago is not None and r.last_step_ago > limit
    living = [r for r in ranks if r.alive is not False]
    dead = [r for r in ranks if r.alive is False]
    if not living:
        return Health("unknown", "every rank's process has exited", ranks, limit)
    ages = [r.last_step_ago for r in ranks if r.last_step_ago is not None]
    if not ages:
        return Health("unknown", "no rank's heartbeat says when it last stepped", ranks, limit)
    since = min(ages)
    if since > limit:
        gone = f"; rank {', '.join(str(r.rank) for r in dead)} exited" if dead else ""
        return Health(
            "stalled",
            f"no rank has finished a step for {since:.0f} s (limit {limit:.0f} s): {_ranks_text(ranks)}{gone}",
            ranks,
            limit,
        )
    stuck = [r for r in ranks if r.stalled]
    for r in ranks:
        others = [o.step_time for o in ranks if o is not r and o.step_time is not None]
        if r.step_time is not None and others:
            typical = statistics.median(others)
            r.slow = r.step_time > SLOW_RATIO * typical and r.step_time - typical >= SLOW_MIN_S
    slow = [r for r in ranks if r.slow or r.stalled]
    if stuck:
        return Health(
            "slow",
            f"rank {', '.join(str(r.rank) for r in stuck)} has finished no step for over {limit:.0f} s "
            "while the others go on: " + _ranks_text(ranks),
            ranks,
            limit,
        )
    if slow:
        worst = max(slow, key=lambda r: r.step_time or 0)
        seconds = worst.step_time or 0.0  # a slow rank has timed its steps
        typical = statistics.median(o.step_time for o in ranks if o is not worst and o.step_time is not None)
        return Health(
            "slow",
            f"rank {', '.join(str(r.rank) for r in slow)} straggles: rank {worst.rank} takes {seconds:.3g} s "
            f"a step, {seconds / typical:.1f}x the others' median {typical:.3g} s",
            ranks,
            limit,
        )
    pace = f", {median:.3g} s a step" if median else ""
    return Health("ok", f"{len(ranks)} rank(s) stepping{pace}, last step {since:.0f} s ago", ranks, limit)


def process_alive(beat: dict[str, Any]) -> bool | None:
    """Whether the heartbeat's process still runs (the same process: its start time matches), None elsewhere."""
    if beat.get("host") != this_host() or not isinstance(beat.get("pid"), int):
        return None
    try:
        return psutil.Process(beat["pid"]).create_time() <= (beat.get("started") or 0) + 1
    except psutil.Error:
        return False


def job_health(
    store: JobStore, record: JobRecord, now: float | None = None, ignored: Callable[[str], None] = lambda why: None
) -> Health:
    """`assess` over the job folder's heartbeats and this host's processes, with the training anomalies the
    supervisor last recorded; `ignored` hears of a heartbeat file that is none."""
    beats = read_heartbeats(store.job_dir(record.id), ignored)
    alive = {beat["rank"]: process_alive(beat) for beat in beats}
    health = assess(beats, time.time() if now is None else now, alive, active=record.active, floor_s=stall_floor())
    health.training = training_anomalies(record)
    return health


# -- what the numbers say --------------------------------------------------------------------------


def _is_reward(key: str) -> bool:
    return key in (TOTAL, MARGIN) or (key.startswith("rewards/") and key.endswith("/mean"))


def _label(key: str) -> str:
    if key.startswith("rewards/") and key.endswith("/mean"):
        return f"reward {key.split('/')[1]}"
    return {
        LOSS: "the loss",
        GRAD_NORM: "the gradient norm",
        TOTAL: "the reward",
        MARGIN: "the reward margin",
        EVAL_LOSS: "the evaluation loss",
    }[key]


@dataclass
class Streak:
    """A series' latest run of equal values: None for values that are no finite number."""

    value: float | None
    since: int
    count: int


class TrainingSigns:
    """What a run's train records say about its learning, folded as they come (the supervisor feeds each new
    record). Watched: the loss, the gradient norm, and the rewards TRL logs (GRPO's total and per function,
    preference's margin); of the eval records, the evaluation loss (only whether it is a number)."""

    def __init__(self) -> None:
        self.records = 0
        self.first_step: int | None = None
        self.streaks: dict[str, Streak] = {}

    def update(self, records: list[dict[str, Any]]) -> None:
        for record in records:
            step = record["step"] if isinstance(record.get("step"), int) else self.records
            if record.get("kind") == "eval" and EVAL_LOSS in record:
                self._fold(EVAL_LOSS, record[EVAL_LOSS], step)
            if record.get("kind") != "train":
                continue
            self.records += 1
            self.first_step = step if self.first_step is None else self.first_step
            for key, value in record.items():
                if key in (LOSS, GRAD_NORM) or _is_reward(key):
                    self._fold(key, value, step)

    def _fold(self, key: str, value: Any, step: int) -> None:
        number = value if isinstance(value, (int, float)) and math.isfinite(value) else None
        streak = self.streaks.get(key)
        if streak is not None and streak.value == number:
            streak.count += 1
        else:
            self.streaks[key] = Streak(number, step, 1)

    def anomalies(self, task: str | None) -> list[tuple[int, str]]:
        """(the step since which it holds, the sentence) for each anomaly of the latest records of a `task` run."""
        found = []
        known = TASKS.get(task) if task else None  # a server job's row names no training task
        # a NaN total follows from its functions': name those
        named = any(_is_reward(key) and key != TOTAL and streak.value is None for key, streak in self.streaks.items())
        for key, streak in self.streaks.items():
            label = _label(key)
            since = f"at every {'evaluation' if key == EVAL_LOSS else 'logging step'} since step {streak.since}"
            if streak.value is None and key == TOTAL and named:
                continue
            if streak.value is None and key != GRAD_NORM:  # fp16's loss scaler skips steps of an infinite norm
                found.append((streak.since, f"{label} is NaN or infinite {since}"))
            elif streak.count < FLAT_STEPS or streak.value is None or key == EVAL_LOSS:
                continue
            elif key == GRAD_NORM and streak.value == 0:
                found.append((streak.since, f"the gradient norm is 0 {since}: no weight moves"))
            elif key == LOSS and not (known and known.loss_near_zero):  # GRPO's: about 0 by design
                found.append((streak.since, f"the loss stays {streak.value:.4g} {since}"))
            elif key in (TOTAL, MARGIN):
                found.append((streak.since, f"{label} stays {streak.value:.4g} {since}: no completion is preferred"))
        if known and known.logs_rewards and self.records and not any(_is_reward(key) for key in self.streaks):
            found.append((self.first_step or 0, "no reward is logged: the reward functions gave no number"))
        return found

    def summary(self, task: str | None) -> dict[str, Any]:
        """What the job's row keeps: the sentences, and whether they hold since the first logging step."""
        found = self.anomalies(task)
        whole_run = bool(found) and all(since <= (self.first_step or 0) for since, _ in found)
        return {"anomalies": [text for _, text in found], "whole_run": whole_run}


def training_anomalies(record: JobRecord) -> list[str]:
    """The training anomalies the supervisor last recorded for the job."""
    anomalies = (record.info.get(TRAINING_KEY) or {}).get("anomalies")
    return [str(text) for text in anomalies] if isinstance(anomalies, list) else []


def training_verdict(record: JobRecord) -> str | None:
    """A succeeded job's training anomalies in two words: `learned nothing` (since its first logging step) or
    `stopped learning`; None when none were seen (a failed or stopped job's message says what ended it)."""
    if record.status != "succeeded" or not training_anomalies(record):
        return None
    return "learned nothing" if (record.info.get(TRAINING_KEY) or {}).get("whole_run") else "stopped learning"


def training_warning(record: JobRecord) -> str | None:
    """A succeeded job's training anomalies as the views show them beside its status (None: none seen), e.g.
    `learned nothing: the reward is NaN or infinite at every logging step since step 10`."""
    verdict = training_verdict(record)
    return f"{verdict}: {'; '.join(training_anomalies(record))}" if verdict else None
