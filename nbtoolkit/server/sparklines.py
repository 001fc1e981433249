"""Loss sparklines for job listings: each job's train-loss series, read incrementally and kept short.

The list endpoint shows one sparkline per row and must stay fast with a thousand jobs, so a
job's metrics.jsonl is read once and afterwards only its new bytes; the series is thinned
(every other point dropped) whenever it grows past twice the points a sparkline draws.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

from nbtoolkit.metrics.series import METRICS_FILE, MetricsReader


@dataclass
class ThinnedSeries:
    """A series that keeps at most `2 * points` values, evenly spaced over everything seen, plus the latest."""

    points: int
    values: list[float] = field(default_factory=list)
    stride: int = 1
    seen: int = 0
    latest: float | None = None

    def add(self, value: float) -> None:
        if self.seen % self.stride == 0:
            self.values.append(value)
            if len(self.values) >= 2 * self.points:
                self.values = self.values[::2]
                self.stride *= 2
        self.seen += 1
        self.latest = value

    def snapshot(self) -> list[float]:
        """The kept values, ending at the latest one so the line ends where the run is now."""
        if self.latest is None or (self.seen - 1) % self.stride == 0:
            return list(self.values)
        return [*self.values, self.latest]


@dataclass
class _Follower:
    reader: MetricsReader
    series: ThinnedSeries
    complete: bool = False  # read to its end after its job ended: nothing more will come


class LossSparklines:
    """Train-loss series per job, cached across requests (least recently used dropped first).

    A long run's file is first read from its last `first_read_bytes` only: the line then shows
    the recent part of that run. A cut first line is never a whole JSON object (records are flat
    objects on one line each), so the reader skips it. Once a job has ended and its file has
    been read to the end, its line is served without touching the file.
    """

    def __init__(self, points: int = 24, max_jobs: int = 4096, first_read_bytes: int = 256 * 1024) -> None:
        self.points, self.max_jobs, self.first_read_bytes = points, max_jobs, first_read_bytes
        self._followers: OrderedDict[str, _Follower] = OrderedDict()
        self._lock = threading.Lock()  # requests are served from several threads

    def loss(self, job_id: str, job_dir: Path, ended: bool = False) -> list[float]:
        """The job's train losses; `ended`: the job has ended, so its file is complete once read."""
        with self._lock:
            return self._loss(job_id, job_dir, ended)

    def _loss(self, job_id: str, job_dir: Path, ended: bool) -> list[float]:
        follower = self._followers.get(job_id)
        if follower is None:
            follower = self._follow(job_id, job_dir)
        else:
            self._followers.move_to_end(job_id)
        if not follower.complete:
            for record in follower.reader.read_new():
                if record.get("kind") == "train" and isinstance(record.get("loss"), (int, float)):
                    follower.series.add(float(f"{record['loss']:.4g}"))  # a sparkline needs no more digits
            follower.complete = ended
        return follower.series.snapshot()

    def _follow(self, job_id: str, job_dir: Path) -> _Follower:
        path = job_dir / METRICS_FILE
        try:
            start = max(0, path.stat().st_size - self.first_read_bytes)
        except FileNotFoundError:
            start = 0
        follower = _Follower(MetricsReader(path, offset=start), ThinnedSeries(self.points))
        self._followers[job_id] = follower
        while len(self._followers) > self.max_jobs:
            self._followers.popitem(last=False)
        return follower
