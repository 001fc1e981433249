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
from typing import TYPE_CHECKING

import psutil

from nbtoolkit.launching.launch import Launch
from nbtoolkit.metrics.parse import SETTLE_S
from nbtoolkit.metrics.series import METRICS_FILE
from nbtoolkit.runner.scrub import job_scrubber, scrub_job_files
from nbtoolkit.runner.stage_boot import with_stage_boot
from nbtoolkit.runner.store import (
    ACTIVE,
    LOG_FILE,
    PRIVATE_DIR,
    PRIVATE_FILE,
    JobRecord,
    JobStore,
    supervisor_process,
    this_host,
)
from nbtoolkit.runner.tree import HOME_ENV, JOB_ID_ENV, end_processes, tagged_processes, terminate_tree

if TYPE_CHECKING:
    from nbtoolkit.runner.warm_interpreter import WarmProfile


def write_launch_files(launch: Launch, directory: Path) -> list[Path]:
    """Write the launch's files, launch.json and an executable run.sh into `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, content in {**launch.files, "launch.json": launch.to_json(), "run.sh": launch.run_sh()}.items():
        path = directory / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
        path.chmod(PRIVATE_FILE)
        written.append(path)
    (directory / "run.sh").chmod(PRIVATE_FILE | stat.S_IXUSR)
    return written


def submit(
    launch: Launch,
    *,
    name: str,
    task: str,
    store: JobStore | None = None,
    resumed_from: str | None = None,
    info: dict | None = None,
    stage_boot: bool = False,
    warm: WarmProfile | None = None,
) -> JobRecord:
    """Create the job, write its directory, and start its detached supervisor; with `stage_boot` (nbtoolkit's
    own program on this machine) the stage boot is first on the PYTHONPATH the supervisor hands its stages.
    `warm`: what a local single-process run of nbtoolkit's program starts with, when it may fork from a warm
    interpreter (warm_interpreter.py), whose supervisor then forks its stage too."""
    store = store or JobStore()
    record = store.create(name=name, task=task, backend=launch.backend, resumed_from=resumed_from, info=info)
    directory = store.job_dir(record.id)
    write_launch_files(launch, directory)
    (directory / LOG_FILE).touch(mode=PRIVATE_FILE)
    (directory / METRICS_FILE).touch(mode=PRIVATE_FILE)
    (directory / "output").mkdir(mode=PRIVATE_DIR)
    env = {**os.environ, HOME_ENV: str(store.home), JOB_ID_ENV: record.id}  # the tag every process of it carries
    if stage_boot:
        env["PYTHONPATH"] = with_stage_boot(env.get("PYTHONPATH"))
    (directory / "supervisor.log").touch(mode=PRIVATE_FILE)  # private like the job's other files
    pid, created = _fork_or_start(record.id, env, directory, launch, warm)
    store.update(record.id, only_if_status=("queued",), supervisor_pid=pid, supervisor_started=created)
    return store.get(record.id)


def _fork_or_start(
    job_id: str, env: dict[str, str], directory: Path, launch: Launch, warm: WarmProfile | None
) -> tuple[int, float | None]:
    """The job's supervisor, forked by the warm interpreter made for jobs like it, else started anew (and that
    interpreter started beside it, for the next such job); its pid and start time."""
    # here, not at the top: `python -m nbtoolkit.runner.warm_interpreter` must not find itself imported already
    from nbtoolkit.runner import warm_interpreter

    if warm is None or not _forks_from_warm(launch):
        return _start_supervisor(job_id, env, directory)
    stage_env = {**env, **launch.env, **launch.stages[0].env}
    key = warm_interpreter.warm_key(stage_env, warm)
    adopted = warm_interpreter.adopt(key, job_id, env, directory)
    if adopted is not None:
        return adopted
    started = _start_supervisor(job_id, env, directory)
    shared = {name: value for name, value in stage_env.items() if name not in warm_interpreter.PER_JOB}
    warm_interpreter.start(key, shared, warm)
    return started


def _forks_from_warm(launch: Launch) -> bool:
    """Whether a warm interpreter may fork the job: one stage, nbtoolkit's program, here, not switched off."""
    from nbtoolkit.runner import warm_interpreter
    from nbtoolkit.runner.forked_stage import PROGRAM

    single = len(launch.stages) == 1
    return single and warm_interpreter.enabled() and launch.stages[0].argv[:3] == [sys.executable, "-m", PROGRAM]


def _start_supervisor(job_id: str, env: dict[str, str], directory: Path) -> tuple[int, float | None]:
    """The job's supervisor as a new process, detached; its pid and start time."""
    with open(directory / "supervisor.log", "wb") as supervisor_log:  # the child keeps its own copy
        process = subprocess.Popen(
            [sys.executable, "-m", "nbtoolkit.runner.supervisor", job_id],
            env=env,
            cwd=directory,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=supervisor_log,
            start_new_session=True,
            close_fds=True,
        )
    # reap it when it ends so a long-lived submitter (a kernel) keeps no zombie
    threading.Thread(target=process.wait, daemon=True, name=f"nbtoolkit-reap-{job_id}").start()
    try:
        started = psutil.Process(process.pid).create_time()
    except psutil.Error:  # it may already have finished
        started = None
    return process.pid, started


def job_launch(directory: Path) -> Launch:
    return Launch.from_dict(json.loads((directory / "launch.json").read_text()))


def stop(job_id: str, *, store: JobStore | None = None, grace: float = 5.0) -> JobRecord:
    """End the job and every process of it; returns its record (still active only if it runs on another host
    whose supervisor has not acted yet: the request stands there).

    The stop is a request in the job's row, which the supervisor honours within a poll wherever it
    runs. On this host we make sure: an unresponsive supervisor is ended with its processes, and a
    job that ended (or was lost) with processes still alive has them ended; they are found by the
    job's tag, never by a pid recorded elsewhere.
    """
    # here, not at the top: `python -m nbtoolkit.runner.supervisor` must not find itself imported by the package
    from nbtoolkit.runner.supervisor import POLL_S, stage_grace

    store = store or JobStore()
    record = store.get(job_id)
    grace = max(grace, *(stage_grace(stage) for stage in job_launch(store.job_dir(record.id)).stages))
    # found now, while they run: one already exiting when the stop is done no longer shows its tag
    seen = tagged_processes(record.id, store.home) if record.host == this_host() else []
    if record.active:
        store.request_stop(record.id)
        # a supervisor that has not begun never will: a queued job stops here and now
        store.update(
            record.id, only_if_status=("queued",), status="stopped", ended=time.time(), message="stopped on request"
        )
        record = wait(record.id, store=store, timeout=2 * grace + 3 * POLL_S + 5)
        if record.active and record.host == this_host():
            _end_unresponsive(store, record, grace)
    if record.host == this_host():
        end_processes([*seen, *tagged_processes(record.id, store.home)], grace)
        if store.get(record.id).status == "lost":  # its watcher may have died with it, before scrubbing
            job_dir = store.job_dir(record.id)
            scrub_job_files(job_dir, job_scrubber(job_dir, dict(os.environ)), lambda text: print(text, file=sys.stderr))
    return store.get(record.id)


def _end_unresponsive(store: JobStore, record: JobRecord, grace: float) -> None:
    """A supervisor on this host that did not honour the stop (stuck, or stopped by a signal): end it all."""
    supervisor = supervisor_process(record)  # the recorded pid only if its start time matches too
    if supervisor is not None:
        terminate_tree(supervisor.pid, grace=grace)
    store.update(record.id, only_if_status=ACTIVE, status="stopped", ended=time.time(), message="stopped on request")


def leftover_processes(record: JobRecord, store: JobStore, settle: float = 0.0) -> list[psutil.Process]:
    """Processes of an ended job still alive on this host (a rank its dead supervisor left behind).

    `settle`: seconds to give them to end first: just after a job records its end, its supervisor
    and watcher (which carry its tag too) are still on their way out.
    """
    found = tagged_processes(record.id, store.home) if record.host == this_host() else []
    if found and settle:
        _, found = psutil.wait_procs(found, timeout=settle)
    return found


def wait(job_id: str, *, store: JobStore | None = None, timeout: float | None = None, poll: float = 0.5) -> JobRecord:
    """Block until the job is no longer queued or running (or `timeout` seconds pass)."""
    store = store or JobStore()
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        record = store.get(job_id)
        if not record.active or (deadline is not None and time.monotonic() >= deadline):
            return record
        time.sleep(poll)


def read_log(
    job_id: str, *, store: JobStore | None = None, offset: int = 0, limit: int | None = None
) -> tuple[str, int]:
    """Log text from byte `offset` (at most `limit` bytes, cut at a line end) and the offset to continue from."""
    chunk = read_log_bytes(job_id, store=store, offset=offset, limit=limit)
    return chunk.decode("utf-8", errors="replace"), offset + len(chunk)


def read_log_bytes(job_id: str, *, store: JobStore | None = None, offset: int = 0, limit: int | None = None) -> bytes:
    """The log's bytes from `offset`: at most `limit`, cut at a line end when a line ends in them."""
    store = store or JobStore()
    path = store.job_dir(store.get(job_id).id) / LOG_FILE
    with open(path, "rb") as handle:
        handle.seek(offset)
        chunk = handle.read() if limit is None else handle.read(limit)
    if limit is not None and len(chunk) == limit and b"\n" in chunk:
        chunk = chunk[: chunk.rfind(b"\n") + 1]
    return chunk


def log_tail(
    job_id: str, lines: int, *, store: JobStore | None = None, block: int = 64 * 1024, max_bytes: int = 8 * 1024 * 1024
) -> str:
    """The last `lines` lines of the log, read backwards from its end in blocks (at most `max_bytes`):
    a long log costs no more than its tail."""
    store = store or JobStore()
    with open(store.job_dir(store.get(job_id).id) / LOG_FILE, "rb") as handle:
        position = end = handle.seek(0, os.SEEK_END)
        data = b""
        while position > 0 and data.count(b"\n") <= lines and end - position < max_bytes:
            position -= min(block, position)
            handle.seek(position)
            data = handle.read(end - position)
    found = data.decode("utf-8", errors="replace").split("\n")
    if found[-1] == "":  # the log ends with a newline: no line after it
        found.pop()
    return "\n".join(found[-lines:]) if lines > 0 else ""


def follow_log(job_id: str, *, store: JobStore | None = None, poll: float = 0.5) -> Iterator[str]:
    """Yield log text as it is written, until the job has ended and the log is drained; and "" once whenever the log
    has been quiet for SETTLE_S, so a reader shows what it held for a line that is not coming."""
    store = store or JobStore()
    log = store.job_dir(job_id) / LOG_FILE
    offset, grew, settled = 0, 0.0, True
    while True:
        active = store.get(job_id).active
        text, offset = read_log(job_id, store=store, offset=offset)
        if text:
            grew, settled = log.stat().st_mtime, False  # a log already quiet when followed settles at once
            yield text
        elif not active:
            return
        else:
            if not settled and time.time() - grew >= SETTLE_S:
                settled = True
                yield ""
            time.sleep(poll)
