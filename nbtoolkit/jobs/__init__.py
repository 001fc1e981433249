"""Jobs: a SQLite row + a directory each, run by a detached supervisor that outlives its submitter.

Calling the package, `nbtoolkit.jobs()`, lists job handles (`nbtoolkit.api.jobs`): the public
name and this package's name are the same, so the package answers both.
"""

import sys
import types

from nbtoolkit.jobs.control import (
    follow_log,
    leftover_processes,
    log_tail,
    read_log,
    stop,
    submit,
    wait,
    write_launch_files,
)
from nbtoolkit.jobs.store import ACTIVE, FINAL, STATUSES, JobNotFound, JobRecord, JobStore

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


class _CallablePackage(types.ModuleType):
    def __call__(self, *args, **kwargs):
        from nbtoolkit.api import jobs

        return jobs(*args, **kwargs)


sys.modules[__name__].__class__ = _CallablePackage
