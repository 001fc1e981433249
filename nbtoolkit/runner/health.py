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

from nbtoolkit.heartbeat import read_heartbeats
from nbtoolkit.runner.store import JobRecord, JobStore, this_host

STALL_FLOOR_ENV, STALL_FLOOR_S = "NBTOOLKIT_STALL_FLOOR_S", 60.0
STALL_STEPS = 10
SLOW_RATIO, SLOW_MIN_S = 1.5, 0.01
STATES = ("ok", "slow", "stalled", "unknown")


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
    """`assess` over the job folder's heartbeats and this host's processes; `ignored` hears of a file that is none."""
    beats = read_heartbeats(store.job_dir(record.id), ignored)
    alive = {beat["rank"]: process_alive(beat) for beat in beats}
    return assess(beats, time.time() if now is None else now, alive, active=record.active, floor_s=stall_floor())
