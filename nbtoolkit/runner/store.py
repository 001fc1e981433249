"""JobStore: one SQLite row and one directory per job, shared by kernels, CLI and server.

SQLite in WAL mode with a busy timeout, a fresh connection per operation: any number of
processes may read and write at once. The directory holds what the job produced
(spec.json, launch.json, run.sh, output.log, metrics.jsonl, output/).

A final status is final: no update moves a job out of succeeded, failed, stopped or lost.
A stop is a request written into the row (`stop_requested`): the job's supervisor honours it,
from whichever host or server it came.
"""

from __future__ import annotations

import json
import math
import os
import re
import secrets
import socket
import sqlite3
import time
import typing
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from enum import StrEnum
from pathlib import Path
from typing import Any

import psutil

from nbtoolkit.launching.runtime import default_home
from nbtoolkit.runner.lock import held


class JobStatus(StrEnum):
    """Where a job is in its life: queued and running are active; succeeded, failed, stopped and lost are final."""

    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    STOPPED = "stopped"
    LOST = "lost"

    def __repr__(self) -> str:
        return repr(self.value)  # the word, as stored: a notebook's `job.wait()` shows 'succeeded'


ACTIVE = (JobStatus.QUEUED, JobStatus.RUNNING)
FINAL = tuple(status for status in JobStatus if status not in ACTIVE)
STATUSES = tuple(JobStatus)
LOG_FILE = "output.log"
JOB_ID = re.compile(r"^[0-9a-f]{8}\Z")
JOB_ID_PREFIX = re.compile(r"^[0-9a-f]{1,8}\Z")
#: a queued job whose supervisor has not reported within this many seconds is lost
QUEUED_GRACE_S = 60.0
#: how long a write waits for another writer before SQLite says "database is locked"
BUSY_TIMEOUT_ENV, BUSY_TIMEOUT_S = "NBTOOLKIT_BUSY_TIMEOUT_S", 30.0
#: this machine's name in job rows; overridable for a host whose name changes (and for tests of shared stores)
HOST_ENV = "NBTOOLKIT_HOST"
#: job folders and the store are readable by their user only (a shared host's other users see nothing)
PRIVATE_DIR, PRIVATE_FILE = 0o700, 0o600

_SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    task TEXT NOT NULL,
    backend TEXT NOT NULL,
    status TEXT NOT NULL,
    created REAL NOT NULL,
    started REAL,
    ended REAL,
    exit_code INTEGER,
    host TEXT NOT NULL,
    supervisor_pid INTEGER,
    supervisor_started REAL,
    pgid INTEGER,
    remote_name TEXT,
    stage TEXT,
    stages TEXT NOT NULL DEFAULT '[]',
    step INTEGER,
    total_steps INTEGER,
    loss REAL,
    samples_per_second REAL,
    message TEXT,
    resumed_from TEXT,
    info TEXT NOT NULL DEFAULT '{}',
    stop_requested REAL,
    seconds_per_step REAL,
    resumed_by TEXT,
    reward REAL
);
CREATE INDEX IF NOT EXISTS jobs_created ON jobs (created);
CREATE INDEX IF NOT EXISTS jobs_status ON jobs (status);
"""
_JSON_COLUMNS = ("stages", "info")
#: PRAGMA user_version of the schema above (1: stop_requested, 2: seconds_per_step, 3: resumed_by, 4: reward); a
#: newer store is refused, an older upgraded
SCHEMA_VERSION = 4
#: columns added since the first schema, each with its type: an older store gains them
ADDED_COLUMNS = {"stop_requested": "REAL", "seconds_per_step": "REAL", "resumed_by": "TEXT", "reward": "REAL"}


class StoreError(RuntimeError):
    """The job store cannot be used (corrupt, or from a newer nbtoolkit); the message says what to do."""


class JobNotFound(LookupError):
    """No job with that id (or id prefix) in the store."""


class AlreadyResumed(RuntimeError):
    """The job was resumed already (one resume per job); `job_id` is the job that resumed it."""

    def __init__(self, resumed: str, job_id: str) -> None:
        super().__init__(f"job {resumed} was resumed already, as job {job_id}")
        self.job_id = job_id


@dataclass
class JobRecord:
    """A job's row: identity, lifecycle, and the latest progress for cheap listing."""

    id: str
    name: str
    task: str
    backend: str
    status: JobStatus
    created: float
    host: str
    started: float | None = None
    ended: float | None = None
    exit_code: int | None = None
    supervisor_pid: int | None = None
    supervisor_started: float | None = None
    pgid: int | None = None
    remote_name: str | None = None
    stage: str | None = None
    stages: list[dict[str, Any]] = field(default_factory=list)
    step: int | None = None
    total_steps: int | None = None
    loss: float | None = None
    samples_per_second: float | None = None
    message: str | None = None
    resumed_from: str | None = None
    #: backend-specific facts: hourly_price_usd, cost_usd and billable_seconds (remote jobs), ...
    info: dict[str, Any] = field(default_factory=dict)
    #: when a stop was asked for (the supervisor ends the job within a poll)
    stop_requested: float | None = None
    #: the measured steady pace (wall seconds per step after the first logging window), while it trains
    seconds_per_step: float | None = None
    #: the job that resumed this one (at most one: a second resume answers with it)
    resumed_by: str | None = None
    #: a grpo job's last mean reward: its progress (its loss stays near 0, the advantages being centred)
    reward: float | None = None

    @property
    def active(self) -> bool:
        return self.status in ACTIVE

    @property
    def elapsed(self) -> float | None:
        if self.started is None:
            return None
        return (self.ended or time.time()) - self.started

    def to_dict(self) -> dict[str, Any]:
        return {item.name: getattr(self, item.name) for item in fields(self)}


def this_host() -> str:
    """The name job rows record for this machine: $NBTOOLKIT_HOST, else the host name."""
    return os.environ.get(HOST_ENV) or socket.gethostname()


class JobStore:
    """Create, read and update job rows; resolve job directories."""

    def __init__(self, home: str | Path | None = None) -> None:
        # absolute: the job's supervisor and programs run in the job folder, not the caller's directory
        self.home = (Path(home).expanduser() if home else default_home()).absolute()
        self.jobs_root = self.home / "jobs"
        self.db_path = self.home / "jobs.db"
        self.jobs_root.mkdir(parents=True, exist_ok=True)
        # private to this user: job folders hold data, logs and models; the store holds every job's row
        self.jobs_root.chmod(PRIVATE_DIR)
        self.db_path.touch(mode=PRIVATE_FILE)
        self.db_path.chmod(PRIVATE_FILE)  # SQLite gives its -wal and -shm files the same mode
        try:
            self._open()
        except sqlite3.OperationalError:  # locked, disk I/O: passing, the caller's to retry
            raise
        except sqlite3.DatabaseError as exc:
            raise StoreError(
                f"{self.db_path} is not a job store nbtoolkit can read ({exc}); move it aside and "
                f"nbtoolkit starts a new one (the job folders under {self.jobs_root} stay)"
            ) from None

    def _open(self) -> None:
        """Create or upgrade the schema; a store from a newer nbtoolkit is left untouched."""
        with self._connect() as conn:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise StoreError(
                    f"{self.db_path} was written by a newer nbtoolkit (store version {version}; this one "
                    f"reads up to {SCHEMA_VERSION}); upgrade nbtoolkit, or set NBTOOLKIT_HOME to another "
                    "folder"
                )
            conn.executescript(_SCHEMA)
            present = {row["name"] for row in conn.execute("PRAGMA table_info(jobs)")}
            for column, kind in ADDED_COLUMNS.items():
                if column not in present:
                    conn.execute(f"ALTER TABLE jobs ADD COLUMN {column} {kind}")
            if version < SCHEMA_VERSION:
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        busy_timeout = float(os.environ.get(BUSY_TIMEOUT_ENV, BUSY_TIMEOUT_S))
        conn = sqlite3.connect(self.db_path, timeout=busy_timeout, isolation_level=None)
        try:
            conn.row_factory = sqlite3.Row
            conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            yield conn
        finally:
            conn.close()

    # -- paths ---------------------------------------------------------------------------------

    def job_dir(self, job_id: str) -> Path:
        """The job's directory; refuses anything that is not a job id (no path tricks)."""
        if not JOB_ID.match(job_id):
            raise JobNotFound(f"'{job_id}' is not a job id (8 hex digits)")
        return self.jobs_root / job_id

    # -- rows ----------------------------------------------------------------------------------

    def create(
        self, *, name: str, task: str, backend: str, resumed_from: str | None = None, info: dict[str, Any] | None = None
    ) -> JobRecord:
        """A new queued job; with `resumed_from`, the one resume of that job, claimed in the same transaction
        (AlreadyResumed names the job that claimed it first)."""
        record = JobRecord(
            id=secrets.token_hex(4),
            name=name,
            task=task,
            backend=backend,
            status=JobStatus.QUEUED,
            created=time.time(),
            host=this_host(),
            resumed_from=resumed_from,
            info=info or {},
        )
        row = record.to_dict()
        for column in _JSON_COLUMNS:
            row[column] = json.dumps(row[column])
        with self._connect() as conn, _transaction(conn):
            if resumed_from is not None:
                _claim_resume(conn, resumed_from, record.id)
            conn.execute(
                f"INSERT INTO jobs ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})", list(row.values())
            )
        self.job_dir(record.id).mkdir(mode=PRIVATE_DIR)
        self.job_dir(record.id).chmod(PRIVATE_DIR)  # whatever the umask
        return record

    def update(self, job_id: str, *, only_if_status: Iterable[str] | None = None, **values: Any) -> bool:
        """Set columns of one job; with `only_if_status`, only while the job is in one of those states.

        A status change applies only to an active job: whatever comes late (a second supervisor,
        a liveness check racing the job's end) cannot move a final job anywhere.
        """
        for column in _JSON_COLUMNS:
            if column in values:
                values[column] = json.dumps(values[column])
        query = f"UPDATE jobs SET {', '.join(f'{key} = ?' for key in values)} WHERE id = ?"
        params = [*values.values(), job_id]
        if only_if_status is not None:
            allowed = tuple(only_if_status)
            query += f" AND status IN ({', '.join('?' * len(allowed))})"
            params += allowed
        if "status" in values:
            query += f" AND status IN ({', '.join('?' * len(ACTIVE))})"
            params += ACTIVE
        with self._connect() as conn:
            return conn.execute(query, params).rowcount == 1

    def set_info(self, job_id: str, key: str, value: Any) -> bool:
        return self.merge_info(job_id, {key: value})

    def merge_info(self, job_id: str, values: dict[str, Any]) -> bool:
        """Set keys of a job's info in place: one statement, so keys another process writes meanwhile stay
        (the supervisor and a remote job's follower both write a job's info)."""
        if not values:
            return True
        paths = ", ".join("?, json(?)" for _ in values)
        pairs = [item for key, value in values.items() for item in (f"$.{key}", json.dumps(value))]
        with self._connect() as conn:
            return (
                conn.execute(
                    f"UPDATE jobs SET info = json_set(info, {paths}) WHERE id = ?",
                    (*pairs, job_id),
                ).rowcount
                == 1
            )

    def get(self, job_id: str) -> JobRecord:
        """The job with this id or unique id prefix, its liveness checked."""
        if not JOB_ID_PREFIX.match(job_id):
            raise JobNotFound(f"'{job_id}' is not a job id (8 hex digits, or a unique prefix of them)")
        with self._connect() as conn:
            rows = conn.execute("SELECT * FROM jobs WHERE id LIKE ? LIMIT 2", (f"{job_id}%",)).fetchall()
        if not rows:
            raise JobNotFound(f"no job '{job_id}'; `nbtoolkit jobs` lists them")
        if len(rows) > 1:
            raise JobNotFound(f"'{job_id}' matches several jobs; give more of the id")
        return self._checked(_record(rows[0]))

    def list(self, statuses: Iterable[str] | None = None, limit: int = 100, offset: int = 0) -> list[JobRecord]:
        """Newest first, optionally only some statuses."""
        query, params = "SELECT * FROM jobs", list[str]()
        if statuses:
            wanted = tuple(statuses)
            query += f" WHERE status IN ({', '.join('?' * len(wanted))})"
            params += wanted
        query += " ORDER BY created DESC LIMIT ? OFFSET ?"
        with self._connect() as conn:
            rows = conn.execute(query, [*params, limit, offset]).fetchall()
        return [self._checked(_record(row)) for row in rows]

    def count(self, statuses: Iterable[str] | None = None) -> int:
        query, params = "SELECT COUNT(*) FROM jobs", tuple[str, ...]()
        if statuses:
            params = tuple(statuses)
            query += f" WHERE status IN ({', '.join('?' * len(params))})"
        with self._connect() as conn:
            return conn.execute(query, params).fetchone()[0]

    def request_stop(self, job_id: str) -> bool:
        """Ask the job's supervisor, wherever it runs, to end the job; False if the job is no longer active."""
        return self.update(job_id, only_if_status=ACTIVE, stop_requested=time.time())

    # -- liveness ------------------------------------------------------------------------------

    def supervisor_alive(self, record: JobRecord) -> bool:
        """Whether the job's supervisor lives: its lock is held (any host sharing the folder), or,
        before it has taken the lock, it is still starting."""
        locked = held(self.job_dir(record.id))
        if locked or (locked is False and record.status == JobStatus.RUNNING):
            return bool(locked)  # a running job's supervisor took the lock: it lives exactly as long as the lock
        # no supervisor holds it yet (starting, or from before the lock): its pid on this host, else the grace
        if record.supervisor_pid is not None and record.host == this_host():
            return supervisor_process(record) is not None
        return time.time() - record.created < QUEUED_GRACE_S

    def _checked(self, record: JobRecord) -> JobRecord:
        """Mark an active job whose supervisor is gone as `lost`, so nothing stays running forever."""
        if not record.active or self.supervisor_alive(record):
            return record
        message = (
            "the job's supervisor process is gone (killed, or the machine restarted); its logs and metrics are kept"
        )
        ended = time.time()
        if self.update(record.id, only_if_status=ACTIVE, status=JobStatus.LOST, ended=ended, message=message):
            record.status, record.message, record.ended = JobStatus.LOST, message, ended
            return record
        return self.get(record.id)


@contextmanager
def _transaction(conn: sqlite3.Connection) -> Iterator[None]:
    """One write transaction, taken at once (BEGIN IMMEDIATE): what it reads no other writer changes before
    it commits."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def _claim_resume(conn: sqlite3.Connection, resumed: str, by: str) -> None:
    """Record `by` as the one job that resumes `resumed`; AlreadyResumed if another did first."""
    if conn.execute("UPDATE jobs SET resumed_by = ? WHERE id = ? AND resumed_by IS NULL", (by, resumed)).rowcount:
        return
    row = conn.execute("SELECT resumed_by FROM jobs WHERE id = ?", (resumed,)).fetchone()
    if row is not None:  # a job of another store (or none) is not claimed here
        raise AlreadyResumed(resumed, row["resumed_by"])


def supervisor_process(record: JobRecord) -> psutil.Process | None:
    """The recorded supervisor if it still runs (same pid *and* start time, not a zombie)."""
    if record.supervisor_pid is None:
        return None
    try:
        process = psutil.Process(record.supervisor_pid)
        if record.supervisor_started is not None and abs(process.create_time() - record.supervisor_started) > 1.0:
            return None
        if process.status() == psutil.STATUS_ZOMBIE:
            return None
        return process
    except psutil.Error:
        return None


def _number_columns() -> dict[str, type]:
    """Column -> int or float, from JobRecord's annotations."""
    hints = typing.get_type_hints(JobRecord)
    return {
        name: kind
        for name, hint in hints.items()
        for kind in (int, float)
        if hint is kind or kind in typing.get_args(hint)
    }


_NUMBER_COLUMNS = _number_columns()


def _number(value: Any, kind: type) -> int | float | None:
    """A stored number as its column's type; anything else (text, NaN, a float in an int column) is None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return value if kind is float else (int(value) if float(value).is_integer() else None)


def _json(text: Any, default: list | dict) -> Any:
    try:
        value = json.loads(text)
    except (TypeError, ValueError):
        return default
    return value if isinstance(value, type(default)) else default


def _status(value: Any) -> JobStatus:
    """A stored status; one this nbtoolkit does not know (a newer one wrote it) reads as lost: nothing here
    follows it."""
    try:
        return JobStatus(value)
    except ValueError:
        return JobStatus.LOST


def _record(row: sqlite3.Row) -> JobRecord:
    """A row as a JobRecord; one bad stored value reads as empty, so one job never breaks a listing."""
    data = dict(row)
    for column, kind in _NUMBER_COLUMNS.items():
        data[column] = _number(data[column], kind)
    data["created"] = data["created"] or 0.0
    data["status"] = _status(data["status"])
    data["stages"], data["info"] = _json(data["stages"], []), _json(data["info"], {})
    return JobRecord(**data)
