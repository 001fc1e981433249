"""The supervisor's eye on its job's health: the state in the job's row for every view (list, panel,
notifications), and its answer when something is wrong.

On a stall (no rank steps; see `health`): the ranks' stacks dumped once by themselves, then `train.on_stall`:
- `warn`: one line in the log naming the stall and the saved stacks report;
- `dump` (the default): that, and the grouped stacks report itself in the log;
- `stop`: that, then the job is stopped, its message saying why.

On a training anomaly (the numbers say it learns nothing; see `health.TrainingSigns`): each new one said in the
log and kept in the row (the views show it beside the final status), then `train.on_anomaly`:
- `warn` (the default): only that;
- `stop`: the job is stopped, its message saying why.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from nbtoolkit.runner.health import TRAINING_KEY, TrainingSigns, job_health
from nbtoolkit.runner.stacks import take_stacks
from nbtoolkit.runner.store import JobStore

ON_STALL = ("warn", "dump", "stop")
INFO_KEY, ON_STALL_KEY, ON_ANOMALY_KEY = "health", "on_stall", "on_anomaly"
CHECK_EVERY_S = 2.0


class HealthWatch:
    def __init__(self, store: JobStore, job_id: str) -> None:
        self.store, self.job_id = store, job_id
        self.checked = 0.0
        self.state: str | None = None
        self.dumped = False
        #: the run's train records, fed by the supervisor as it reads them
        self.training = TrainingSigns()
        self.said: set[str] = set()
        self.recorded: dict | None = None
        #: set when train.on_stall or train.on_anomaly: stop ended the job (its message)
        self.stop_message: str | None = None

    def check(self, say: Callable[[str], None], note: Callable[[str], None], *, final: bool = False) -> bool:
        """Look at the job's health (every CHECK_EVERY_S; `final`: now, the training numbers alone, as the job
        ends); True when the job must stop (on_stall or on_anomaly: stop). `note` hears, once each, of files in
        the ranks' folder that are no heartbeat."""
        now = time.time()
        if not final and (now - self.checked < CHECK_EVERY_S or self.stop_message):  # stopping: its word stays
            return False
        self.checked = now
        record = self.store.get(self.job_id)
        stop = self._training(say, record.task, record.info.get(ON_ANOMALY_KEY) or "warn", final)
        return not final and (self._stall(say, note, record, now) or stop)

    def _training(self, say: Callable[[str], None], task: str, on_anomaly: str, final: bool) -> bool:
        """Record and say the training anomalies; True when train.on_anomaly: stop stops the job for them (not
        once it has ended: `final`)."""
        summary = self.training.summary(task)
        if summary != self.recorded:
            self.store.set_info(self.job_id, TRAINING_KEY, summary)
            self.recorded = summary
        new = [text for text in summary["anomalies"] if text not in self.said]
        if not new:
            return False
        self.said.update(new)
        for text in new:
            say(f"training anomaly (train.on_anomaly: {on_anomaly}): {text}")
        if on_anomaly != "stop" or self.stop_message or final:
            return False
        self.stop_message = f"stopped by train.on_anomaly: stop: {'; '.join(summary['anomalies'])}"
        return True

    def _stall(self, say: Callable[[str], None], note: Callable[[str], None], record, now: float) -> bool:
        """Record the job's process health; on a stall, its stacks and train.on_stall."""
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
        if on_stall != "stop" or self.stop_message:
            return False
        self.stop_message = f"stalled ({health.reason}); stopped by train.on_stall: stop. Stacks: {summary}"
        return True
