"""Submitting, stopping, waiting for and following jobs. Knows Launches, not engines."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psutil

from nbtoolkit.backends.launch import Launch
from nbtoolkit.jobs.store import ACTIVE, LOG_FILE, JobRecord, JobStore, supervisor_process
from nbtoolkit.jobs.supervisor import stage_grace
from nbtoolkit.jobs.tree import terminate_tree
from nbtoolkit.metrics.series import METRICS_FILE


def write_launch_files(launch: Launch, directory: Path) -> list[Path]:
    """Write the launch's files, launch.json and an executable run.sh into `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, content in {**launch.files, "launch.json": launch.to_json(), "run.sh": launch.run_sh()}.items():
        path = directory / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
        written.append(path)
    run_sh = directory / "run.sh"
    run_sh.chmod(run_sh.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return written


def submit(launch: Launch, *, name: str, task: str, store: JobStore | None = None,
           resumed_from: str | None = None, info: dict | None = None) -> JobRecord:
    """Create the job, write its directory, and start its detached supervisor."""
    store = store or JobStore()
    record = store.create(name=name, task=task, backend=launch.backend, resumed_from=resumed_from, info=info)
    directory = store.job_dir(record.id)
    write_launch_files(launch, directory)
    (directory / LOG_FILE).touch()
    (directory / METRICS_FILE).touch()
    (directory / "output").mkdir()
    env = {**os.environ, "NBTOOLKIT_HOME": str(store.home)}
    process = subprocess.Popen(
        [sys.executable, "-m", "nbtoolkit.jobs.supervisor", record.id],
        env=env, cwd=directory, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=open(directory / "supervisor.log", "wb"), start_new_session=True, close_fds=True,
    )
    # reap it when it ends so a long-lived submitter (a kernel) keeps no zombie
    threading.Thread(target=process.wait, daemon=True, name=f"nbtoolkit-reap-{record.id}").start()
    try:
        started = psutil.Process(process.pid).create_time()
    except psutil.Error:  # it may already have finished
        started = None
    store.update(record.id, only_if_status=("queued",), supervisor_pid=process.pid, supervisor_started=started)
    return store.get(record.id)


def job_launch(directory: Path) -> Launch:
    return Launch.from_dict(json.loads((directory / "launch.json").read_text()))


def stop(job_id: str, *, store: JobStore | None = None, grace: float = 5.0) -> JobRecord:
    """End every process of the job (the supervisor ends the ranks; we make sure) and mark it stopped."""
    store = store or JobStore()
    record = store.get(job_id)
    if not record.active:
        return record
    grace = max(grace, *(stage_grace(stage) for stage in job_launch(store.job_dir(record.id)).stages))
    supervisor = supervisor_process(record)
    if supervisor is not None:
        supervisor.terminate()
        try:
            supervisor.wait(timeout=grace * 2 + 5)
        except psutil.TimeoutExpired:  # unresponsive: end it and its tree ourselves
            terminate_tree(supervisor.pid, grace=grace)
    if record.pgid:
        terminate_tree(record.pgid, grace=grace)
    store.update(record.id, only_if_status=ACTIVE, status="stopped", ended=time.time(),
                 message="stopped on request")
    return store.get(record.id)


def wait(job_id: str, *, store: JobStore | None = None, timeout: float | None = None,
         poll: float = 0.5) -> JobRecord:
    """Block until the job is no longer queued or running (or `timeout` seconds pass)."""
    store = store or JobStore()
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        record = store.get(job_id)
        if not record.active or (deadline is not None and time.monotonic() >= deadline):
            return record
        time.sleep(poll)


def read_log(job_id: str, *, store: JobStore | None = None, offset: int = 0,
             limit: int | None = None) -> tuple[str, int]:
    """Log text from byte `offset` (at most `limit` bytes, cut at a line end) and the offset to continue from."""
    store = store or JobStore()
    path = store.job_dir(store.get(job_id).id) / LOG_FILE
    with open(path, "rb") as handle:
        handle.seek(offset)
        chunk = handle.read() if limit is None else handle.read(limit)
    if limit is not None and len(chunk) == limit and b"\n" in chunk:
        chunk = chunk[: chunk.rfind(b"\n") + 1]
    return chunk.decode("utf-8", errors="replace"), offset + len(chunk)


def follow_log(job_id: str, *, store: JobStore | None = None, poll: float = 0.5) -> Iterator[str]:
    """Yield log text as it is written, until the job has ended and the log is drained."""
    store = store or JobStore()
    offset = 0
    while True:
        active = store.get(job_id).active
        text, offset = read_log(job_id, store=store, offset=offset)
        if text:
            yield text
        elif not active:
            return
        else:
            time.sleep(poll)

