"""The detached supervisor: runs a job's stages, records its lifecycle, ends all of it on stop.

Started by `submit` in a new session, so it outlives the kernel or shell that started it.
Each stage runs in its own process group with stdout/stderr appended to output.log; the
supervisor never sits in the data path of the training program's output.

    python -m nbtoolkit.jobs.supervisor JOB_ID      (NBTOOLKIT_HOME names the store)
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil

from nbtoolkit.backends.launch import Launch, Stage
from nbtoolkit.backends.program import ERROR_PREFIX
from nbtoolkit.jobs.store import ACTIVE, LOG_FILE, JobStore
from nbtoolkit.jobs.tree import terminate_tree
from nbtoolkit.metrics.parse import RANK_PREFIX, LogParser
from nbtoolkit.metrics.series import METRICS_FILE, MetricsReader, Progress

LOG_PREFIX = "[nbtoolkit]"
#: `ValueError: ...`, `torch.OutOfMemoryError: ...`: what a failed rank's traceback ends with
EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Interrupt)\b.*:")
POLL_S = 1.0
STOP_GRACE_S = 5.0
#: every stage learns its job's id from this variable (a remote job's follower records facts in its row)
JOB_ID_ENV = "NBTOOLKIT_JOB_ID"


class Supervisor:
    def __init__(self, store: JobStore, job_id: str) -> None:
        self.store, self.job_id = store, job_id
        self.dir = store.job_dir(job_id)
        self.launch = Launch.from_dict(json.loads((self.dir / "launch.json").read_text()))
        self.stop_requested = threading.Event()
        self.progress = Progress()
        self.metrics = MetricsReader(self.dir / METRICS_FILE)
        self.stages = [{"name": stage.name, "status": "pending"} for stage in self.launch.stages]

    def run(self) -> int:
        me = psutil.Process()
        self.store.update(self.job_id, status="running", started=time.time(), supervisor_pid=me.pid,
                          supervisor_started=me.create_time(), stages=self.stages)
        exit_code = 0
        with open(self.dir / LOG_FILE, "ab", buffering=0) as log:
            for index, stage in enumerate(self.launch.stages):
                if self.stop_requested.is_set():
                    break
                exit_code = self._run_stage(index, stage, log)
                if exit_code != 0:
                    for later in range(index + 1, len(self.stages)):
                        self._set_stage(later, status="skipped")
                    break
            self._finish(exit_code, log)
        return exit_code

    def _run_stage(self, index: int, stage: Stage, log) -> int:
        self._say(log, f"stage {stage.name}: {shlex.join(stage.argv)}")
        self._set_stage(index, status="running", started=time.time())
        env = {**os.environ, **self.launch.env, **stage.env, JOB_ID_ENV: self.job_id}
        try:
            process = subprocess.Popen(stage.argv, cwd=self.dir, env=env, stdin=subprocess.DEVNULL, stdout=log,
                                       stderr=subprocess.STDOUT, start_new_session=True)
        except OSError as exc:
            self._say(log, f"stage {stage.name} could not start: {exc}")
            self._set_stage(index, status="failed", ended=time.time(), exit_code=127)
            self.store.update(self.job_id, message=f"stage {stage.name} could not start: {exc.strerror or exc}")
            return 127
        self.store.update(self.job_id, pgid=process.pid, stage=stage.name)
        parser = LogParser() if stage.metrics_from_log else None
        log_offset = (self.dir / LOG_FILE).stat().st_size
        while True:
            try:
                exit_code = process.wait(timeout=POLL_S)
                break
            except subprocess.TimeoutExpired:
                pass
            if self.stop_requested.is_set():
                self._say(log, f"stop requested: ending stage {stage.name} and all its processes")
                terminate_tree(process.pid, grace=stage_grace(stage))
            log_offset = self._follow(parser, log_offset)
        terminate_tree(process.pid, grace=STOP_GRACE_S)  # stragglers a rank left behind
        self._follow(parser, log_offset, final=True)
        status = "stopped" if self.stop_requested.is_set() else "succeeded" if exit_code == 0 else "failed"
        self._set_stage(index, status=status, ended=time.time(), exit_code=exit_code)
        self._say(log, f"stage {stage.name} {status} (exit code {exit_code})")
        return exit_code

    def _follow(self, parser: LogParser | None, log_offset: int, final: bool = False) -> int:
        """Parse new log text into metrics (if the program writes none) and refresh the row's progress."""
        if parser is not None:
            with open(self.dir / LOG_FILE, "rb") as handle:
                handle.seek(log_offset)
                chunk = handle.read()
            log_offset += len(chunk)
            records = parser.feed(chunk.decode("utf-8", errors="replace"))
            if final:
                records += parser.flush()
            if records:
                with open(self.dir / METRICS_FILE, "a") as metrics:
                    metrics.writelines(json.dumps(record) + "\n" for record in records)
        if self.progress.update(self.metrics.read_new()):
            progress = self.progress
            self.store.update(self.job_id, step=progress.step, total_steps=progress.total_steps, loss=progress.loss,
                              samples_per_second=progress.samples_per_second)
        return log_offset

    def _finish(self, exit_code: int, log) -> None:
        if self.stop_requested.is_set():
            status, message = "stopped", "stopped on request"
        elif exit_code == 0:
            status, message = "succeeded", None
        else:
            status = "failed"
            message = self.store.get(self.job_id).message or failure_message(self.dir / LOG_FILE, exit_code)
        self._say(log, f"job {status}")
        self.store.update(self.job_id, only_if_status=ACTIVE, status=status, ended=time.time(),
                          exit_code=exit_code, message=message, stage=None)

    def _set_stage(self, index: int, **values) -> None:
        self.stages[index].update(values)
        self.store.update(self.job_id, stages=self.stages)

    @staticmethod
    def _say(log, text: str) -> None:
        log.write(f"{LOG_PREFIX} {time.strftime('%H:%M:%S')} {text}\n".encode())


def stage_grace(stage: Stage) -> float:
    """Seconds between SIGTERM and SIGKILL when the stage is stopped."""
    return stage.stop_grace_s if stage.stop_grace_s is not None else STOP_GRACE_S


def failure_message(log_path: Path, exit_code: int) -> str:
    """The program's own error sentence (`[nbtoolkit] error: ...`), else its last line."""
    with open(log_path, "rb") as handle:
        handle.seek(max(0, log_path.stat().st_size - 65536))
        text = handle.read().decode("utf-8", errors="replace")
    lines = [RANK_PREFIX.sub("", line, count=1).strip() for line in text.splitlines()]  # `[rank0]:` from torchrun
    explained = [line for line in lines if line.startswith(ERROR_PREFIX)]
    if explained:
        return explained[-1][len(ERROR_PREFIX):].strip()
    # a rank's exception rather than the launcher's summary of it
    raised = [line for line in lines if EXCEPTION_LINE.match(line) and "ChildFailedError" not in line]
    lines = raised or [line for line in lines if line and not line.startswith(LOG_PREFIX)]
    last = lines[-1][:300] if lines else "no output"
    return f"exited with code {exit_code}: {last}"


def main(argv: list[str] | None = None) -> int:
    job_id = (argv or sys.argv[1:])[0]
    supervisor = Supervisor(JobStore(), job_id)
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, lambda *_: supervisor.stop_requested.set())
    return supervisor.run()


if __name__ == "__main__":
    sys.exit(main())
