"""What the REST API does, apart from HTTP: list, read, follow and stop jobs of one store.

Handlers stay thin and call this; it validates every id before any path is built from it,
so nothing outside the store's job directories can be read.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable
from pathlib import Path
from typing import Literal, get_args

from nbtoolkit.lineage.chains import MODEL_FROM
from nbtoolkit.metrics.console import console_page, log_order
from nbtoolkit.metrics.forecast import comparison_lines
from nbtoolkit.metrics.parse import SETTLE_S, STEP_LINE
from nbtoolkit.metrics.series import MAX_LINE_BYTES, METRICS_FILE, MetricsReader, downsample, tail_records
from nbtoolkit.runner import control
from nbtoolkit.runner.store import JOB_ID, LOG_FILE, STATUSES, JobRecord, JobStore
from nbtoolkit.server.models import HarnessComparison, JobDetail, JobList, JobSummary, LogPage, MetricsPage
from nbtoolkit.server.sparklines import LossSparklines
from nbtoolkit.spec import SpecError, load_spec
from nbtoolkit.spec_parts.trackers import describe as describe_trackers
from nbtoolkit.trained_model import harness

LIST_LIMIT_DEFAULT, LIST_LIMIT_MAX = 100, 1000
#: how far back a console page looks for the line before it (a Trainer dict or a step line is far shorter)
LINE_BEFORE_BYTES = 4096
#: how far into a log its first step line is looked for (past a launcher's and DeepSpeed's start-up lines)
ORDER_HEAD_BYTES = 1 << 20
LOG_LIMIT_DEFAULT, LOG_LIMIT_MAX = 64 * 1024, 1024 * 1024
#: what the log endpoint serves: the program's own output, or one line per logging step as every console shows
LogView = Literal["raw", "console"]
LOG_VIEWS: tuple[str, ...] = get_args(LogView)
METRICS_PAGE_BYTES = 1024 * 1024
#: the most a downsampled read reads (every byte of a range up to this size: exact extremes; beyond, a window
#: per stretch): about 0.1 s of parsing on a quiet core
DOWNSAMPLE_READ_BYTES = 2 * 1024 * 1024
#: the most points a downsampled series asks for (per kind: a bucket keeps up to three records)
POINTS_MAX = 5000
#: what an ended job's forecast comparison reads: the end of its metrics (the summary, the steady pace)
DETAIL_TAIL_BYTES = 256 * 1024
#: ended jobs whose comparison lines are remembered (they do not change)
PLANNED_CACHE = 4096
#: a running job's detail counts as changed at least this often (its elapsed time and cost move on)
ACTIVE_ETAG_S = 30


class InvalidRequest(ValueError):
    """A parameter the API cannot take; the message names it, the value, and what would be valid."""


class JobsService:
    def __init__(self, store: JobStore | None = None, sparklines: LossSparklines | None = None) -> None:
        self.store = store or JobStore()
        self.sparklines = sparklines or LossSparklines()
        self._planned: OrderedDict[str, list[str]] = OrderedDict()
        self._planned_lock = threading.Lock()  # requests are served from several threads

    def list(self, statuses: Iterable[str] = (), limit: int = LIST_LIMIT_DEFAULT, offset: int = 0) -> JobList:
        statuses = list(statuses)
        for status in statuses:
            if status not in STATUSES:
                raise InvalidRequest(f"status '{status}' is not a job status; use one of {', '.join(STATUSES)}")
        _check_range("limit", limit, 1, LIST_LIMIT_MAX)
        _check_range("offset", offset, 0, None)
        records = self.store.list(statuses or None, limit=limit, offset=offset)
        # a page that is not full (and not past the end) is the last one: no need to count
        last_page = len(records) < limit and (records or offset == 0)
        total = offset + len(records) if last_page else self.store.count(statuses or None)
        return JobList(jobs=[self._summary(record) for record in records], total=total, limit=limit, offset=offset)

    def get(self, job_id: str) -> JobDetail:
        return self._detail(self._record(job_id))

    def get_if_changed(self, job_id: str, known: str | None = None) -> tuple[JobDetail | None, str]:
        """(the job, its ETag), or (None, the ETag) when `known` (an If-None-Match header) holds the ETag: a
        poll of a job where nothing changed costs a row read and two stats, not a body."""
        record = self._record(job_id)
        tag = self._etag(record)
        held = {item.strip().removeprefix("W/") for item in (known or "").split(",")}
        if "*" in held or tag in held:  # RFC 9110: weak comparison, and * matches any current representation
            return None, tag
        return self._detail(record), tag

    def metrics(self, job_id: str, since: int = 0, points: int = 0) -> MetricsPage:
        """Records completed after byte cursor `since`: a page of at most about 1 MiB, or, with `points` and more
        than a page to read, the whole rest downsampled to about that many points per kind (see `downsample`)."""
        record = self._record(job_id)
        _check_range("since", since, 0, None)
        _check_range("points", points, 0, POINTS_MAX)
        path = self.store.job_dir(record.id) / METRICS_FILE
        since = min(since, _size(path))  # past the end (seek() refuses the largest cursors): an empty page
        if points and _size(path) - since > METRICS_PAGE_BYTES:
            records, next_offset = downsample(path, since, points, DOWNSAMPLE_READ_BYTES)
            return MetricsPage(records=records, since=since, next=next_offset, status=record.status, downsampled=True)
        reader = MetricsReader(path, offset=since)
        records = reader.read_new(max_bytes=METRICS_PAGE_BYTES)
        return MetricsPage(records=records, since=since, next=reader.offset, status=record.status)

    def log(self, job_id: str, offset: int = 0, limit: int = LOG_LIMIT_DEFAULT, view: str = "raw") -> LogPage:
        """Log text from byte `offset` (negative: that many bytes before the end, from a line start): as the
        program wrote it (`raw`), or as a console shows it (`console`: one line per logging step)."""
        record = self._record(job_id)
        _check_range("limit", limit, 1, LOG_LIMIT_MAX)
        if view not in LOG_VIEWS:
            raise InvalidRequest(f"view '{str(view)[:40]}' is not a log view; use one of {', '.join(LOG_VIEWS)}")
        path = self.store.job_dir(record.id) / LOG_FILE
        try:
            size = path.stat().st_size
        except FileNotFoundError:  # not written yet
            return LogPage(text="", offset=0, next=0, size=0, status=record.status)
        if offset < 0:
            offset = _next_line_start(path, max(0, size + offset))
        offset = min(offset, size)  # past the end (seek() refuses the largest offsets): an empty page
        if view == "console":
            chunk = control.read_log_bytes(record.id, store=self.store, offset=offset, limit=limit)
            more = offset + len(chunk) < size
            now = path.stat()  # after the read: a line written just before it is not yet quiet
            settled = not more and now.st_size == offset + len(chunk) and time.time() - now.st_mtime >= SETTLE_S
            previous = _line_before(path, offset)
            steps = STEP_LINE.encode()
            text, used = console_page(
                chunk,
                final=not record.active and not more,
                more=more,
                settled=settled,
                previous=previous,
                order=_log_order(path) if steps in chunk or steps in previous else None,  # a log of no step lines
            )
            next_offset = offset + used
        else:
            text, next_offset = control.read_log(record.id, store=self.store, offset=offset, limit=limit)
        return LogPage(text=text, offset=offset, next=next_offset, size=size, status=record.status)

    def stop(self, job_id: str) -> JobDetail:
        """End every process of the job (blocks for up to the stop grace period)."""
        return self._detail(control.stop(self._record(job_id).id, store=self.store))

    def _record(self, job_id: str) -> JobRecord:
        if not JOB_ID.match(job_id):
            raise InvalidRequest(f"'{job_id[:40]}' is not a job id; a job id is 8 hex digits, e.g. 3f9a0c1d")
        return self.store.get(job_id)

    def _summary(self, record: JobRecord) -> JobSummary:
        return JobSummary.of(record, self._loss_series(record))

    def _detail(self, record: JobRecord) -> JobDetail:
        job_dir = self.store.job_dir(record.id)
        compared = harness.stored(job_dir)
        return JobDetail.of(
            record,
            self._loss_series(record),
            planned=self._planned_lines(record),
            tracking=_tracking(job_dir),
            model_from=record.info.get(MODEL_FROM),
            harness=HarnessComparison(
                tasks=compared.tasks, limit=compared.limit, note=compared.note, rows=compared.rows
            )
            if compared
            else None,
        )

    def _planned_lines(self, record: JobRecord) -> list[str]:
        """The forecast beside what the job measured: a running job shows the forecast; an ended one's lines are
        worked out once, from the end of its metrics (whatever the file's size), and remembered."""
        if record.active:
            return comparison_lines(record, [])
        with self._planned_lock:
            if record.id in self._planned:
                self._planned.move_to_end(record.id)
                return self._planned[record.id]
        lines = comparison_lines(record, tail_records(self.store.job_dir(record.id) / METRICS_FILE, DETAIL_TAIL_BYTES))
        with self._planned_lock:
            self._planned[record.id] = lines
            while len(self._planned) > PLANNED_CACHE:
                self._planned.popitem(last=False)
        return lines

    def _etag(self, record: JobRecord) -> str:
        """What the detail shows depends on: the row, the sizes of the metrics and the log, the harness results (an
        evaluation may rewrite them at the same size), and for a running job the time (elapsed, cost) in steps of
        ACTIVE_ETAG_S."""
        job_dir = self.store.job_dir(record.id)
        facts = [
            record.to_dict(),
            *(_size(job_dir / name) for name in (METRICS_FILE, LOG_FILE, harness.RESULTS_FILE)),
            _mtime(job_dir / harness.RESULTS_FILE),
        ]
        if record.active:
            facts.append(int(time.time() // ACTIVE_ETAG_S))
        digest = hashlib.blake2b(json.dumps(facts, sort_keys=True, default=str).encode(), digest_size=12)
        return f'"{digest.hexdigest()}"'

    def _loss_series(self, record: JobRecord) -> list[float]:
        return self.sparklines.loss(record.id, self.store.jobs_root / record.id, ended=not record.active)


def _tracking(job_dir: Path) -> list[str]:
    try:
        spec = load_spec(job_dir / "spec.json")
    except (OSError, SpecError):  # a job from before spec.json, or a folder being written
        return []
    return describe_trackers(spec, job_dir)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:  # not written yet
        return 0


def _mtime(path: Path) -> int:
    try:
        return path.stat().st_mtime_ns
    except FileNotFoundError:  # not written yet
        return 0


def _check_range(name: str, value: int, low: int, high: int | None) -> None:
    if value < low or (high is not None and value > high):
        valid = f"from {low} to {high}" if high is not None else f"{low} or more"
        raise InvalidRequest(f"{name} {value} is out of range; use {valid}")


def _log_order(path: Path) -> str | None:
    """The order of step line and dict in the log, from its first step line (in its first ORDER_HEAD_BYTES; the
    first 64 KiB are looked at first, where it is in most logs)."""
    with open(path, "rb") as handle:
        head = handle.read(LOG_LIMIT_DEFAULT)
        order = log_order(head)
        if order is None and len(head) == LOG_LIMIT_DEFAULT:
            order = log_order(head + handle.read(ORDER_HEAD_BYTES - LOG_LIMIT_DEFAULT))
        return order


def _line_before(path: Path, position: int) -> bytes:
    """The whole line that ends just before `position` (b"" at the start, or for a line longer than we look back)."""
    if position == 0:
        return b""
    with open(path, "rb") as handle:
        handle.seek(max(0, position - LINE_BEFORE_BYTES))
        behind = handle.read(min(position, LINE_BEFORE_BYTES))
    if not behind.endswith(b"\n"):
        return b""
    start = behind.rfind(b"\n", 0, len(behind) - 1) + 1
    return behind[start:-1] if start or position <= LINE_BEFORE_BYTES else b""


def _next_line_start(path: Path, position: int) -> int:
    """The offset of the first line (or `\r`-refreshed progress bar) with text that starts at or after
    `position`, looking at most MAX_LINE_BYTES ahead; else `position` itself, so an unterminated last
    line (a tqdm bar) still shows."""
    if position == 0:
        return 0
    with open(path, "rb") as handle:
        handle.seek(position - 1)
        ahead = handle.read(MAX_LINE_BYTES)
    for separator in (b"\n", b"\r"):
        start = ahead.find(separator) + 1
        if 0 < start < len(ahead):
            return position - 1 + start
    return position
