"""The supervisor's eye on its job's health: the state in the job's row for every view (list, panel,
notifications), and on a stall the ranks' stacks dumped once by themselves, then `train.on_stall`:

- `warn`: one line in the log naming the stall and the saved stacks report;
- `dump` (the default): that, and the grouped stacks report itself in the log;
- `stop`: that, then the job is stopped, its message saying why.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from nbtoolkit.runner.health import job_health
from nbtoolkit.runner.stacks import take_stacks
from nbtoolkit.runner.store import JobStore

ON_STALL = ("warn", "dump", "stop")
INFO_KEY, ON_STALL_KEY = "health", "on_stall"
CHECK_EVERY_S = 2.0


class StallWatch:
    def __init__(self, store: JobStore, job_id: str) -> None:
        self.store, self.job_id = store, job_id
        self.checked = 0.0
        self.state: str | None = None
        self.dumped = False
        #: set when train.on_stall: stop ended the job (its message)
        self.stop_message: str | None = None

    def check(self, say: Callable[[str], None], note: Callable[[str], None]) -> bool:
        """Look at the job's health (every CHECK_EVERY_S); True when the job must stop (on_stall: stop). `note`
        hears, once each, of files in the ranks' folder that are no heartbeat."""
        now = time.time()
        if now - self.checked < CHECK_EVERY_S or self.stop_message:  # stopping: the stall stays the last word
            return False
        self.checked = now
        record = self.store.get(self.job_id)
        health = job_health(self.store, record, now, lambda why: note(f"ignoring a heartbeat: {why}"))
        if health.state != self.state:
            self.state = health.state
            self.store.set_info(self.job_id, INFO_KEY, {"state": health.state, "reason": health.reason, "time": now})
        if health.state != "stalled" or self.dumped:
            return False
        self.dumped = True
        on_stall = record.info.get(ON_STALL_KEY) or "dump"
        say(f"stalled: {health.reason}")
        try:
            report = take_stacks(self.store, record)
        except Exception as exc:  # no py-spy, ranks gone meanwhile: the stall is still said
            say(f"could not take the ranks' stacks: {exc}")
            summary = "no stacks"
        else:
            summary = report.summary()
            say(f"stacks of every rank saved in {report.path}: {summary}")
            if on_stall in ("dump", "stop"):
                for line in filter(None, report.text().splitlines()):
                    say(f"  {line}")
        if on_stall != "stop":
            return False
        self.stop_message = f"stalled ({health.reason}); stopped by train.on_stall: stop. Stacks: {summary}"
        return True
