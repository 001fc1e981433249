"""The supervisor's lock: held for as long as a job's supervisor lives, by the kernel, not by a pid.

A pid names a process on one host and is reused; an flock on a file in the job folder is
released the moment its holder dies, however it died, and other hosts that share the folder
(NFSv4 home, a renamed container) see it too. So "is this job's supervisor alive?" is asked
of the lock, never answered by signalling a pid recorded elsewhere.
"""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path

LOCK_FILE = "supervisor.lock"
#: a reader holds its probe for microseconds; a supervisor that cannot lock for this long has a rival
ACQUIRE_S = 2.0


class SupervisorLock:
    """The lock one supervisor takes before it runs a job, and keeps until it exits."""

    def __init__(self, directory: Path) -> None:
        self.path = Path(directory) / LOCK_FILE
        self.fd: int | None = None

    def acquire(self) -> bool:
        """Take the lock; False if another supervisor holds it (this one then must not run the job)."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        deadline = time.monotonic() + ACQUIRE_S
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                self.fd = fd
                return True
            except BlockingIOError:
                if time.monotonic() > deadline:
                    os.close(fd)
                    return False
                time.sleep(0.02)

    def forget(self) -> None:
        """Close this process's copy without releasing the holder's lock (a forked child calls this)."""
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def held(directory: Path) -> bool | None:
    """True while a supervisor holds the job's lock, False once none does, None if no supervisor ever took it."""
    try:
        fd = os.open(Path(directory) / LOCK_FILE, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # also drops the probe's shared lock
    return False
