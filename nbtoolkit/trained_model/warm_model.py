"""A finished job's model kept loaded in a process of its own between `Job.predict` calls and Try-it messages.

The kernel imports no torch, so the model answers from another process; one started per message spent 10-21 s
loading torch and the model each time. One process per job folder (`nbtoolkit.train.inference --serve`): it
ends itself after `NBTOOLKIT_PREDICT_IDLE_S` seconds without a request (default IDLE_S) and when this process
ends (its stdin closes; `stop_all` at exit), and it loads the model again when the model's files change.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

from nbtoolkit.backends import LaunchError
from nbtoolkit.runner.stage_boot import booted_env

#: seconds a warm model process waits for the next request before it ends (a chat's pauses fit in it)
IDLE_S = 300.0
#: seconds `stop` gives a process to end after its stdin closes, before it is killed
STOP_S = 5.0

_processes: dict[str, ModelProcess] = {}
_lock = threading.Lock()  # one request at a time per kernel: a Try-it box and a cell never interleave lines


class ModelProcess:
    """One `inference --serve` process: a request is a JSON line on its stdin, the reply a JSON line on its stdout."""

    def __init__(self, job_dir: Path) -> None:
        self.job_dir = job_dir
        # its stderr, open as long as it runs (`stop` closes it): the end of it says why it died, if it does
        self.log = tempfile.TemporaryFile()  # noqa: SIM115  # open for the process's life, closed in stop()
        idle = os.environ.get("NBTOOLKIT_PREDICT_IDLE_S", str(IDLE_S))
        self.process = subprocess.Popen(
            [sys.executable, "-m", "nbtoolkit.train.inference", "--serve", "--idle-s", idle],
            cwd=job_dir,
            env=booted_env(),  # its exit, after the last answer, is not waited on for seconds
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            text=True,
        )

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def ask(self, request: dict[str, Any]) -> dict[str, Any] | None:
        """The reply, or None when the process ended before giving one."""
        assert self.process.stdin is not None and self.process.stdout is not None
        try:
            self.process.stdin.write(json.dumps(request) + "\n")
            self.process.stdin.flush()
        except BrokenPipeError:
            return None
        line = self.process.stdout.readline()
        return json.loads(line) if line else None

    def said(self) -> str:
        """The end of what the process wrote to stderr."""
        self.log.seek(0)
        return self.log.read().decode(errors="replace").strip()[-500:]

    def stop(self) -> None:
        """Close its stdin (it ends at once when idle, after the answer it is computing otherwise), then kill it."""
        if self.process.stdin is not None and not self.process.stdin.closed:
            with contextlib.suppress(BrokenPipeError):  # it ended already, its pipe unread
                self.process.stdin.close()
        try:
            self.process.wait(STOP_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()
        self.log.close()


def answers(job_id: str, job_dir: Path, inputs: list, checkpoint: str | None) -> list:
    """The job's model's answers to `inputs`, from its warm process (started on the first request)."""
    key = str(job_dir.resolve())
    request = {"inputs": inputs, "checkpoint": checkpoint, "cwd": os.getcwd()}  # relative paths in inputs are ours
    with _lock:
        for _ in range(2):  # an idle process may end just as a request reaches it: then once more, afresh
            process = _processes.get(key)
            if process is None or not process.alive:
                if process is not None:
                    process.stop()
                if not job_dir.is_dir():
                    raise LaunchError(f"the job folder {job_dir} of job {job_id} no longer exists")
                process = _processes[key] = ModelProcess(job_dir)
            reply = process.ask(request)
            if reply is not None:
                break
            process.process.wait()
            if process.process.returncode != 0:
                raise LaunchError(f"nbtoolkit.train.inference failed on job {job_id}: {process.said()}")
        else:
            raise LaunchError(f"the model process of job {job_id} ended twice before answering: {process.said()}")
    if "error" in reply:
        raise LaunchError(reply["error"])
    if "failed" in reply:
        raise LaunchError(f"nbtoolkit.train.inference failed on job {job_id}: {reply['failed']}")
    return reply["answers"]


def running(job_dir: Path) -> ModelProcess | None:
    """The job's warm process, if one runs."""
    process = _processes.get(str(job_dir.resolve()))
    return process if process is not None and process.alive else None


def stop_all() -> None:
    """End every warm process (at this process's exit too)."""
    with _lock:
        for process in _processes.values():
            process.stop()
        _processes.clear()


atexit.register(stop_all)
