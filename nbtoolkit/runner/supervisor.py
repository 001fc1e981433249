"""The detached supervisor: runs a job's stages, records its lifecycle, ends all of it on stop.

Started by `submit` in a new session, so it outlives the kernel or shell that started it.
Each stage runs in its own process group; its stdout/stderr reach output.log through one pipe the
supervisor copies through its `Scrubber`, which knows every secret value the job was given: what a
launcher echoes (DeepSpeed logs its whole command line) or a script prints never lands in a file.
Per-rank log files the launcher writes itself are scrubbed as each stage ends (`scrub`), whatever their size.

It holds the job's lock (`lock`) while it lives, and starts a watcher that ends the job's
processes if it dies (`watcher`). It polls its row for a stop request, so a stop works from any
host. Nothing the job or the machine does ends it early: a store locked by another writer, a
full disk, odd values in a user script's metrics.jsonl are noted in the log and ridden out.

    python -m nbtoolkit.runner.supervisor JOB_ID      (NBTOOLKIT_HOME names the store)
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import IO

import psutil

from nbtoolkit.launching.credentials import redact_args, resolve_args
from nbtoolkit.launching.launch import JOB_DIR_ENV, Launch, Stage, expand_job_dir
from nbtoolkit.launching.runtime import ERROR_PREFIX, die_with_parent
from nbtoolkit.metrics import budget, cost
from nbtoolkit.metrics.parse import RANK_PREFIX, SETTLE_S, LogParser
from nbtoolkit.metrics.series import METRICS_FILE, STRUCTURED_MARKER, MetricsReader, Progress
from nbtoolkit.runner.forked_stage import fork_stage
from nbtoolkit.runner.health_watch import HealthWatch
from nbtoolkit.runner.listing import cost_usd
from nbtoolkit.runner.lock import SupervisorLock
from nbtoolkit.runner.scrub import RankStreams, job_scrubber, scrub_job_files
from nbtoolkit.runner.store import ACTIVE, LOG_FILE, JobStore, this_host
from nbtoolkit.runner.tree import JOB_ID_ENV, end_processes, tagged_processes, terminate_tree
from nbtoolkit.runner.watcher import start_watcher

LOG_PREFIX = "[nbtoolkit]"
#: `ValueError: ...`, `torch.OutOfMemoryError: ...`: what a failed rank's traceback ends with
EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Interrupt)\b.*:")
POLL_S = 1.0
STOP_GRACE_S = 5.0
#: how long a write that must land (a status) keeps retrying a busy store before the supervisor gives up
STORE_RETRY_S = 600.0
#: below this many free bytes, a failure is put down to the full disk
DISK_FULL_BYTES = 1 << 20


class Supervisor:
    def __init__(self, store: JobStore, job_id: str, fork_stages: bool = False) -> None:
        self.store, self.job_id = store, job_id
        self.fork_stages = fork_stages  # forked from a warm interpreter: nbtoolkit's program forks from it too
        self.dir = store.job_dir(job_id)
        self.launch = Launch.from_dict(json.loads((self.dir / "launch.json").read_text()))
        self.stop_requested = threading.Event()
        self.progress = Progress()
        self.metrics = MetricsReader(self.dir / METRICS_FILE)
        self.stages = [{"name": stage.name, "status": "pending"} for stage in self.launch.stages]
        self.unwritten: list[dict] = []  # parsed metric records a full disk kept out of metrics.jsonl
        self.log_grew = time.monotonic()  # when the parser last got new log text
        self.noted: set[str] = set()
        self.stop_offset: int | None = None  # where the log stood when the stop came
        self.interrupted = False  # a stop ended a stage or kept one from starting (not one that had ended already)
        self.reaper_pid: int | None = None
        self.log: IO[bytes] | None = None  # output.log, open while the stages run
        self.budget_recorded: dict | None = None  # the budget record last put in the job's info
        self.health_watch = HealthWatch(store, job_id)  # health in the row; train.on_stall, train.on_anomaly
        self.started = 0.0  # when the job began (and began to be billed)
        self.scrubber = job_scrubber(self.dir, dict(os.environ))

    def run(self) -> int:
        me = psutil.Process()
        self.started = time.time()
        if not self._write(
            only_if_status=("queued",),
            status="running",
            host=this_host(),
            started=self.started,
            supervisor_pid=me.pid,
            supervisor_started=me.create_time(),
            stages=self.stages,
        ):
            return 0  # stopped before it began, or declared lost meanwhile: a late supervisor runs nothing
        exit_code = 0
        with open(self.dir / LOG_FILE, "ab", buffering=0) as log:
            self.log = log
            for index, stage in enumerate(self.launch.stages):
                if self._stopping():
                    self.interrupted = True
                    for later in range(index, len(self.stages)):
                        self._set_stage(later, status="skipped")
                    break
                exit_code = self._run_stage(index, stage, log)
                if exit_code != 0 or self._budget_stopped():
                    for later in range(index + 1, len(self.stages)):
                        self._set_stage(later, status="skipped")
                    break
            self._finish(exit_code, log)
        return exit_code

    def _run_stage(self, index: int, stage: Stage, log) -> int:
        self._say(log, f"stage {stage.name}: {shlex.join(redact_args(stage.argv))}")
        self._set_stage(index, status="running", started=time.time())
        env = {**os.environ, **self.launch.env, **stage.env, JOB_ID_ENV: self.job_id, JOB_DIR_ENV: str(self.dir)}
        env[cost.BILLED_SINCE_ENV] = repr(self.started)  # the budget counts from where the listing does
        argv = resolve_args([expand_job_dir(item, str(self.dir)) for item in stage.argv])
        cwd = self.launch.workdir or self.dir
        try:
            process = (fork_stage(argv, cwd, env) if self.fork_stages else None) or subprocess.Popen(
                argv,
                cwd=cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=die_with_parent,  # from the main thread, which lives as long as this process
            )
        except OSError as exc:
            self._say(log, f"stage {stage.name} could not start: {exc}")
            self._set_stage(index, status="failed", ended=time.time(), exit_code=127)
            self._write(message=f"stage {stage.name} could not start: {exc.strerror or exc}")
            return 127
        self._write(must=False, pgid=process.pid, stage=stage.name)
        pump = threading.Thread(target=self._pump, args=(process.stdout, log), daemon=True, name="nbtoolkit-log")
        pump.start()
        parser = LogParser() if stage.metrics_from_log else None
        log_offset = (self.dir / LOG_FILE).stat().st_size
        stopped_here = False
        while True:
            try:
                exit_code = process.wait(timeout=POLL_S)
                break
            except subprocess.TimeoutExpired:
                pass
            if self._stopping():
                if (own_exit := process.poll()) is not None:  # it ended by itself as the stop came: its own exit stands
                    exit_code = own_exit
                    break
                if self.stop_offset is None:
                    self.stop_offset = (self.dir / LOG_FILE).stat().st_size
                stopped_here = True
                self._say(log, f"stop requested: ending stage {stage.name} and all its processes")
                for ended in terminate_tree(process.pid, grace=stage_grace(stage)):
                    if ended.pid == process.pid and (code := getattr(ended, "returncode", None)) is not None:
                        process.returncode = code  # psutil reaped it: its status, not Popen's 0
            log_offset = self._follow(parser, log_offset)
            if self._watch_health(log):
                self.stop_requested.set()  # train.on_stall or train.on_anomaly: stop
        terminate_tree(process.pid, grace=STOP_GRACE_S)  # stragglers a rank left behind
        # and any that left the tree and the group (a grandchild in its own session whose parent died)
        end_processes(tagged_processes(self.job_id, self.store.home, exclude=(self.reaper_pid or 0,)), STOP_GRACE_S)
        pump.join(timeout=STOP_GRACE_S)  # the output still in the pipe; a process outside the job may hold it open
        scrub_job_files(self.dir, self.scrubber, self._note)
        self._follow(parser, log_offset, final=True)
        self.interrupted = stopped_here
        status = "stopped" if self.interrupted else "succeeded" if exit_code == 0 else "failed"
        self._set_stage(index, status=status, ended=time.time(), exit_code=exit_code)
        self._say(log, f"stage {stage.name} {status} (exit code {exit_code})")
        return exit_code

    def _pump(self, output, log) -> None:
        """Copy a stage's output into the log through the scrubber, rank by rank, as it comes."""
        streams = RankStreams(self.scrubber)
        with output:
            while chunk := os.read(output.fileno(), 1 << 16):
                self._append(log, streams.feed(chunk))
            self._append(log, streams.flush())

    def _append(self, log, data: bytes) -> None:
        """All of `data`: a full disk holds it until there is room (the program waits on its pipe meanwhile,
        as on a slow disk), so no line is lost and the metrics parsed from the log miss no step."""
        while data:
            try:
                data = data[log.write(data) :]
            except OSError as exc:
                self._note(f"could not write the program's output to the log ({exc}); retrying until there is room")
                time.sleep(POLL_S)

    def _follow(self, parser: LogParser | None, log_offset: int, final: bool = False) -> int:
        """Parse new log text into metrics (if the program writes none) and refresh the row's progress.

        Whatever goes wrong here (a full disk, a busy store) is noted and tried again next poll:
        following is never a reason for the job to end.
        """
        try:
            if parser is not None and (self.dir / STRUCTURED_MARKER).exists():
                parser = None  # the program writes exact records itself (a Trainer under autolog, nbtoolkit.log)
            if parser is not None:
                with open(self.dir / LOG_FILE, "rb") as handle:
                    handle.seek(log_offset)
                    chunk = handle.read()
                log_offset += len(chunk)
                self.unwritten += parser.feed(chunk.decode("utf-8", errors="replace"))
                if chunk:
                    self.log_grew = time.monotonic()
                elif time.monotonic() - self.log_grew >= SETTLE_S:
                    self.unwritten += parser.settle()
                if final:
                    self.unwritten += parser.flush()
            if self.unwritten:
                append_records(self.dir / METRICS_FILE, self.scrubber.value(self.unwritten))
                self.unwritten = []
            records = self.metrics.read_new()
            changed = self.progress.update(records)
            self.health_watch.training.update(records)
            for note in self.metrics.notes:
                self._note(note)
            self.metrics.notes.clear()
            if self.progress.budget is not None and self.progress.budget != self.budget_recorded:
                self.store.set_info(self.job_id, budget.INFO_KEY, self.progress.budget)  # the panel shows it
                self.budget_recorded = self.progress.budget
            if changed:
                progress = self.progress
                self._write(
                    must=False,
                    step=progress.step,
                    total_steps=progress.total_steps,
                    loss=progress.loss,
                    reward=progress.reward,
                    samples_per_second=progress.samples_per_second,
                    seconds_per_step=progress.seconds_per_step,
                )
        except Exception as exc:
            self._note(f"could not record metrics ({exc}); retrying")
        return log_offset

    def _finish(self, exit_code: int, log) -> None:
        ended = time.time()
        self._watch_health(log, final=True)  # the last records' training anomalies, beside the final status
        stop_error = self.stop_offset is not None and program_error(self.dir / LOG_FILE, self.stop_offset)
        if stop_error:  # the program said why it could not stop (a remote job it could not end)
            status, message = "failed", f"the stop did not complete: {stop_error}"
        elif self.interrupted:
            status, message = "stopped", self.health_watch.stop_message or "stopped on request"
        elif exit_code == 0 and self._budget_stopped():
            status, message = "stopped", budget.stop_message(self._final_budget(ended), self.job_id)
        elif exit_code == 0:
            status, message = "succeeded", None
        else:
            status = "failed"
            message = self._recorded_message() or failure_message(self.dir / LOG_FILE, exit_code)
            if shutil.disk_usage(self.dir).free < DISK_FULL_BYTES:
                message += f"; the disk holding {self.dir} is full"
        self._say(log, f"job {status}")
        self._write(only_if_status=ACTIVE, status=status, ended=ended, exit_code=exit_code, message=message, stage=None)

    def _final_budget(self, ended: float) -> dict:
        """The stop record with what the job cost in all (checkpoint and exit included), the figure every
        listing shows from now on; the panel reads the record from the job's info."""
        stopped = dict(self.progress.budget or {})
        with contextlib.suppress(sqlite3.Error):
            spent = cost_usd(replace(self.store.get(self.job_id), ended=ended))
            if spent is not None:
                stopped["cost_usd"] = spent
                self.store.set_info(self.job_id, budget.INFO_KEY, stopped)
        return stopped

    def _watch_health(self, log, final: bool = False) -> bool:
        """The job's health (see health_watch); True when train.on_stall or train.on_anomaly says stop. Never
        ends the supervisor."""
        try:
            return self.health_watch.check(lambda text: self._say(log, text), self._note, final=final)
        except Exception as exc:
            self._note(f"could not check the job's health ({exc}); checking again")
            return False

    def _budget_stopped(self) -> bool:
        """The training program ended itself at train.budget_usd (with a checkpoint)."""
        return self.progress.budget is not None and self.progress.budget.get("reached") == "stopped"

    def _stopping(self) -> bool:
        """A stop came: by signal, or as a request in the job's row (from any host, or the server)."""
        if not self.stop_requested.is_set():
            try:
                if self.store.get(self.job_id).stop_requested is not None:
                    self.stop_requested.set()
            except sqlite3.Error as exc:  # a busy store: ask again next poll
                self._note(f"could not read the job store ({exc}); asking again")
        return self.stop_requested.is_set()

    def _recorded_message(self) -> str | None:
        try:
            return self.store.get(self.job_id).message
        except sqlite3.Error:
            return None

    def _write(self, *, must: bool = True, only_if_status=None, **values) -> bool:
        """Update the job's row. A busy store is retried (`must`: until it answers), never fatal."""
        values = {key: self.scrubber.value(value) for key, value in values.items()}  # a message may quote a secret
        deadline = time.monotonic() + STORE_RETRY_S
        while True:
            try:
                return self.store.update(self.job_id, only_if_status=only_if_status, **values)
            except sqlite3.OperationalError as exc:
                self._note(f"the job store did not answer ({exc}); {'retrying' if must else 'next poll'}")
                if not must or time.monotonic() > deadline:
                    return False
                time.sleep(POLL_S)

    def _set_stage(self, index: int, **values) -> None:
        self.stages[index].update(values)
        self._write(must=False, stages=self.stages)

    def _note(self, text: str) -> None:
        """Say something once in the log (a note repeated every poll would flood it)."""
        if text not in self.noted:
            self.noted.add(text)
            self._say(self.log, text)

    def _say(self, log, text: str) -> None:
        """A line of our own in the log; a full disk loses the line, never the job."""
        line = self.scrubber.text(f"{LOG_PREFIX} {time.strftime('%H:%M:%S')} {text}\n")
        try:
            if log is None:
                raise OSError("log not open")
            log.write(line.encode())
        except OSError:
            with contextlib.suppress(OSError):  # supervisor.log, if it has room
                print(line, end="", file=sys.stderr, flush=True)


def append_records(path: Path, records: list[dict]) -> None:
    """Append whole lines or nothing: a write the disk cut short is taken back, so no torn line
    glues itself to the next record (which would lose both)."""
    data = "".join(json.dumps(record) + "\n" for record in records).encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        start = os.fstat(fd).st_size
        written = 0
        try:
            while written < len(data):
                written += os.write(fd, data[written:])
        except OSError:
            os.ftruncate(fd, start)
            raise
    finally:
        os.close(fd)


def stage_grace(stage: Stage) -> float:
    """Seconds between SIGTERM and SIGKILL when the stage is stopped."""
    return stage.stop_grace_s if stage.stop_grace_s is not None else STOP_GRACE_S


def _log_lines(log_path: Path, since: int = 0) -> list[str]:
    """The log's last 64 KiB (from `since` at the earliest), `[rank0]:` prefixes from torchrun removed."""
    with open(log_path, "rb") as handle:
        handle.seek(max(since, log_path.stat().st_size - 65536))
        text = handle.read().decode("utf-8", errors="replace")
    return [RANK_PREFIX.sub("", line, count=1).strip() for line in text.splitlines()]


def program_error(log_path: Path, since: int = 0) -> str | None:
    """The program's own error sentence (`[nbtoolkit] error: ...`) written after byte `since`, if any."""
    explained = [line for line in _log_lines(log_path, since) if line.startswith(ERROR_PREFIX)]
    return explained[-1][len(ERROR_PREFIX) :].strip() if explained else None


def failure_message(log_path: Path, exit_code: int) -> str:
    """The program's own error sentence (`[nbtoolkit] error: ...`), else its last line."""
    explained = program_error(log_path)
    if explained:
        return explained
    lines = _log_lines(log_path)
    # a rank's exception rather than the launcher's summary of it
    raised = [line for line in lines if EXCEPTION_LINE.match(line) and "ChildFailedError" not in line]
    lines = raised or [line for line in lines if line and not line.startswith(LOG_PREFIX)]
    last = lines[-1][:300] if lines else "no output"
    return f"exited with code {exit_code}: {last}"


def main(argv: list[str] | None = None, fork_stages: bool = False) -> int:
    job_id = (argv or sys.argv[1:])[0]
    os.umask(0o077)  # what the job's programs write (checkpoints, models, logs) is private too
    store = JobStore()
    lock = SupervisorLock(store.job_dir(job_id))
    if not lock.acquire():
        print(f"[nbtoolkit] job {job_id} already has a supervisor; this one leaves it alone", file=sys.stderr)
        return 0
    supervisor = Supervisor(store, job_id, fork_stages)
    grace = max([STOP_GRACE_S, *(stage_grace(stage) for stage in supervisor.launch.stages)])
    supervisor.reaper_pid, _keep_open = start_watcher(job_id, grace)  # EOF when this process dies
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, lambda *_: supervisor.stop_requested.set())
    return supervisor.run()


if __name__ == "__main__":
    sys.exit(main())
