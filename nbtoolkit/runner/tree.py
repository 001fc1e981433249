"""Ending every process of a job: the process tree, its process group, and whatever carries its tag.

Every process a job starts inherits its environment, whatever session or process group it
moves to; the supervisor puts the job's id and store there (`JOB_ID_ENV`, `NBTOOLKIT_HOME`).
That tag finds a rank whose parent is gone and which left the group (a grandchild in its own
session), on this host; other hosts' processes are never looked for here.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import psutil

#: every process of a job carries its id in this variable (a remote job's follower records facts with it)
JOB_ID_ENV = "NBTOOLKIT_JOB_ID"
HOME_ENV = "NBTOOLKIT_HOME"
#: the watcher's module, as its command line names it
WATCHER_MODULE = "nbtoolkit.runner.watcher"


def job_processes(pid: int) -> list[psutil.Process]:
    """The process `pid`, its descendants, and any orphan still in its process group."""
    found: dict[int, psutil.Process] = {}
    try:
        root = psutil.Process(pid)
        found[root.pid] = root
        found.update((child.pid, child) for child in root.children(recursive=True))
    except psutil.Error:
        pass
    for process in psutil.process_iter():
        try:
            if process.pid not in found and os.getpgid(process.pid) == pid:
                found[process.pid] = process
        except (OSError, psutil.Error):
            continue
    found.pop(os.getpid(), None)
    return list(found.values())


def tagged_processes(job_id: str, home: Path, exclude: tuple[int, ...] = ()) -> list[psutil.Process]:
    """The live processes on this host whose environment names this job of this store."""
    real_home = os.path.realpath(home)
    skip = {os.getpid(), *exclude}
    found = []
    for process in psutil.process_iter(["environ"], ad_value=None):
        environ = process.info["environ"] or {}
        if process.pid in skip or environ.get(JOB_ID_ENV) != job_id or not environ.get(HOME_ENV):
            continue
        if os.path.realpath(environ[HOME_ENV]) == real_home:
            found.append(process)
    return found


def end_processes(processes: list[psutil.Process], grace: float = 5.0) -> list[psutil.Process]:
    """SIGTERM the processes, SIGKILL what is left after `grace` seconds; returns them.

    Our own children among them are reaped here: their exit status is in their `returncode`.
    """
    for process in processes:
        with contextlib.suppress(psutil.Error):
            process.terminate()
    _, alive = psutil.wait_procs(processes, timeout=grace)
    for process in alive:
        with contextlib.suppress(psutil.Error):
            process.kill()
    psutil.wait_procs(alive, timeout=grace)
    return processes


def terminate_tree(pid: int, grace: float = 5.0) -> list[psutil.Process]:
    """End the process `pid`, its descendants and its process group (TERM, then KILL after `grace`)."""
    return end_processes(job_processes(pid), grace)
