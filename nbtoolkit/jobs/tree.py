"""Ending every process of a job: the process tree and its process group, TERM then KILL."""

from __future__ import annotations

import os

import psutil


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


def terminate_tree(pid: int, grace: float = 5.0) -> list[int]:
    """SIGTERM the job's processes, SIGKILL what is left after `grace` seconds; returns the pids ended."""
    processes = job_processes(pid)
    for process in processes:
        try:
            process.terminate()
        except psutil.Error:
            pass
    _, alive = psutil.wait_procs(processes, timeout=grace)
    for process in alive:
        try:
            process.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(alive, timeout=grace)
    return [process.pid for process in processes]
