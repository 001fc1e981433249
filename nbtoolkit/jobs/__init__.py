"""Jobs: a SQLite row + a directory each, run by a detached supervisor that outlives its submitter."""

from nbtoolkit.jobs.control import follow_log, read_log, stop, submit, wait, write_launch_files
from nbtoolkit.jobs.store import ACTIVE, FINAL, STATUSES, JobNotFound, JobRecord, JobStore

__all__ = ["ACTIVE", "FINAL", "STATUSES", "JobNotFound", "JobRecord", "JobStore", "follow_log", "read_log",
           "stop", "submit", "wait", "write_launch_files"]
