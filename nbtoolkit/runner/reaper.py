"""The supervisor's reaper: a forked watcher that ends what a dead supervisor left running.

Stages run in their own sessions (so a stop can end each one's process group), so when the
supervisor itself is killed (kill -9, the OOM killer) nothing would end its ranks: they would
keep the accelerators and keep writing. The reaper waits on a pipe that only the supervisor
holds open; end of file means the supervisor is gone, however it went. It then ends every
process tagged with the job (see `tree`) and, if the job was still active, records it lost.
"""

from __future__ import annotations

import os
import sqlite3
import sys
import time

from nbtoolkit.runner.lock import SupervisorLock
from nbtoolkit.runner.store import JobStore
from nbtoolkit.runner.tree import end_processes, tagged_processes

#: how long the reaper keeps trying to record the outcome when the store is busy
RECORD_TRIES, RECORD_PAUSE_S = 30, 1.0


def start_reaper(store: JobStore, job_id: str, lock: SupervisorLock, grace: float) -> tuple[int, int]:
    """Fork the reaper; returns (its pid, the pipe end this process must keep open until it exits)."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid:
        os.close(read_end)
        return pid, write_end
    try:  # the reaper: never returns into the supervisor's code
        os.setsid()  # out of the supervisor's group, so ending that group does not end the reaper
        os.close(write_end)
        lock.forget()  # the lock must fall when the supervisor dies, not when the reaper does
        while os.read(read_end, 1):
            pass
        reap(store, job_id, grace)
    except BaseException as exc:
        print(f"[nbtoolkit] reaper of job {job_id}: {exc!r}", file=sys.stderr, flush=True)
    finally:
        os._exit(0)


def reap(store: JobStore, job_id: str, grace: float) -> list[int]:
    """End the job's remaining processes; if the supervisor died with the job active, record it lost."""
    ended = end_processes(tagged_processes(job_id, store.home), grace)
    for _ in range(RECORD_TRIES):
        try:
            record = store.get(job_id)  # marks it lost if the supervisor died before recording an end
            if record.status == "lost" and ended:
                store.update(job_id, message=f"{record.message}; its {len(ended)} remaining processes were ended")
            return ended
        except sqlite3.OperationalError:
            time.sleep(RECORD_PAUSE_S)
    return ended
