"""The job runner: a SQLite row + a directory per job, run by a detached supervisor that outlives
its submitter. The public `nbtoolkit.jobs()` (job handles) lives in `nbtoolkit.api`, above this.
"""

from nbtoolkit.runner.control import (
    follow_log,
    leftover_processes,
    log_tail,
    read_log,
    stop,
    submit,
    wait,
    write_launch_files,
)
from nbtoolkit.runner.store import ACTIVE, FINAL, STATUSES, JobNotFound, JobRecord, JobStore

__all__ = [
    "ACTIVE",
    "FINAL",
    "STATUSES",
    "JobNotFound",
    "JobRecord",
    "JobStore",
    "follow_log",
    "leftover_processes",
    "log_tail",
    "read_log",
    "stop",
    "submit",
    "wait",
    "write_launch_files",
]
