"""Live charts in a notebook: a job's loss, learning rate and throughput, redrawn as metrics arrive.

A background thread follows the metrics (a job's metrics.jsonl, or a cell's captured output),
redraws at most about once a second when something new arrived, and stops by itself when the
run ends. The chart is one display output updated in place (`display_id`), so JupyterLab,
headless nbclient and a saved notebook all end with the final image, no widget state needed.
"""

from __future__ import annotations

import base64
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from nbtoolkit.jobs.listing import duration
from nbtoolkit.metrics.series import METRICS_FILE, MetricsReader

#: at most one redraw per this many seconds while a run is going
REDRAW_INTERVAL_S = 1.0
#: how often the follower looks for new metrics
POLL_S = 0.25


@dataclass(frozen=True)
class RunState:
    """What the progress line needs besides the records: where the run is in its life."""

    status: str
    started: float | None
    ended: float | None
    finished: bool


class MetricSource(Protocol):
    """Something a LiveChart follows: new records since the last call, and the run's state."""

    title: str

    def read_new(self) -> list[dict[str, Any]]: ...

    def state(self) -> RunState: ...


class JobSource:
    """A job's metrics.jsonl and store row (works for any job, including one older than this kernel)."""

    def __init__(self, job) -> None:
        self.job = job
        record = job.record
        self.title = f"job {record.id} · {record.name}"
        self._reader = MetricsReader(Path(job.dir) / METRICS_FILE)

    def read_new(self) -> list[dict[str, Any]]:
        return self._reader.read_new()

    def state(self) -> RunState:
        record = self.job.record
        return RunState(record.status, record.started, record.ended, not record.active)


class LiveChart:
    """Follows a MetricSource from a daemon thread and keeps one display output up to date.

    `redraws` counts the images drawn, `png` is the latest, `wait()` blocks until the run
    has ended and the final image is out, `stop()` ends following early (drawing once more).
    """

    def __init__(self, source: MetricSource, *, log_scale: bool = False, smoothing: float = 0.6,
                 interval: float = REDRAW_INTERVAL_S, show: bool = True) -> None:
        if not 0 <= smoothing < 1:
            raise ValueError(f"smoothing {smoothing} is out of range; use 0 (none) up to 0.99")
        self.source, self.log_scale, self.smoothing, self.interval = source, log_scale, smoothing, interval
        self.records: list[dict[str, Any]] = []
        self.redraws = 0
        self.png: bytes | None = None
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._done = threading.Event()
        self._handle = _display_handle(source.title) if show else None
        self._thread = threading.Thread(target=self._follow, daemon=True, name=f"nbtoolkit-chart {source.title}")
        self._thread.start()

    @property
    def running(self) -> bool:
        return not self._done.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the run ended and the final image is drawn; False if `timeout` passed first."""
        return self._done.wait(timeout)

    def stop(self, timeout: float | None = 30.0) -> None:
        """Stop following (the chart keeps what it drew last, redrawn once with everything read)."""
        self._stop.set()
        self._done.wait(timeout)

    def _follow(self) -> None:
        drawn: tuple | None = None
        last_draw = float("-inf")
        try:
            while True:
                state = self.source.state()  # before reading: records written before the end are all read
                self.records += self.source.read_new()
                final = state.finished or self._stop.is_set()
                current = (len(self.records), state.status)
                if current != drawn and (final or time.monotonic() - last_draw >= self.interval):
                    self._draw(state)
                    drawn, last_draw = current, time.monotonic()
                if final:
                    return
                self._stop.wait(POLL_S)
        except BaseException as exc:  # a chart must never take the kernel down; keep the reason
            self.error = exc
        finally:
            self._done.set()

    def _draw(self, state: RunState) -> None:
        from nbtoolkit.metrics.plots import png

        line = progress_line(self.records, state)
        self.png = png(render(self.records, f"{self.source.title}\n{line}", log_scale=self.log_scale,
                              smoothing=self.smoothing))
        self.redraws += 1
        self._publish({"image/png": base64.b64encode(self.png).decode("ascii"),
                       "text/plain": f"{self.source.title}: {line}"})

    def _publish(self, bundle: dict[str, str]) -> None:
        if self._handle is not None:
            self._handle.update(bundle, raw=True)

    def __repr__(self) -> str:
        return f"<LiveChart {self.source.title!r} {'following' if self.running else 'done'}, {self.redraws} redraws>"


def live_chart(job, *, log_scale: bool = False, smoothing: float = 0.6, show: bool = True) -> LiveChart:
    """A live chart of a job (a Job handle or a job id): shown now, redrawn until the job ends.

    `smoothing` (0 to 0.99) is the weight of the moving average drawn over the raw loss;
    `log_scale` draws loss on a log axis. Returns at once: the kernel stays free.
    """
    if isinstance(job, str):
        from nbtoolkit.api import Job

        job = Job(job)
    return LiveChart(JobSource(job), log_scale=log_scale, smoothing=smoothing, show=show)


def _display_handle(title: str):
    """A display output to update in place, when running under IPython (else None)."""
    from IPython.core.interactiveshell import InteractiveShell

    if not InteractiveShell.initialized():
        return None
    from IPython.display import display

    return display({"text/plain": f"{title}: waiting for metrics"}, raw=True, display_id=True)


def progress_line(records: list[dict[str, Any]], state: RunState, now: float | None = None) -> str:
    """`running · step 20/60 (33%) · elapsed 0:12 · remaining ~0:24 · loss 0.6931`"""
    parts = [state.status]
    steps = [record for record in records if record.get("step") is not None]
    step = steps[-1]["step"] if steps else None
    total = next((record["max_steps"] for record in reversed(records) if record.get("max_steps")), None)
    if step is not None:
        parts.append(f"step {step}/{total} ({100 * step // total}%)" if total else f"step {step}")
    if state.started is not None:
        elapsed = (state.ended or now or time.time()) - state.started
        parts.append(f"elapsed {duration(elapsed)}")
        if not state.finished and step and total and total > step:
            parts.append(f"remaining ~{duration(elapsed / step * (total - step))}")
    loss = next((record["loss"] for record in reversed(records)
                 if record.get("kind") == "train" and record.get("loss") is not None), None)
    if loss is not None:
        parts.append(f"loss {loss:.4f}")
    if not records:
        parts.append("waiting for metrics")
    return " · ".join(parts)


def render(records: list[dict[str, Any]], title: str, *, log_scale: bool = False, smoothing: float = 0.6):
    """The chart as a Figure: loss (raw, smoothed, eval), learning rate, throughput."""
    from nbtoolkit.metrics.plots import COLORS, new_figure, plot_loss, points
    from nbtoolkit.metrics.throughput import steady_state

    figure, (loss, rate, speed) = new_figure(13, 3.8, ncols=3)
    figure.suptitle(title, fontsize=10)
    plot_loss(loss, records, smoothing=smoothing)
    loss.set(title="Loss", xlabel="step")
    if loss.lines:
        loss.legend(fontsize=8)
        if log_scale:
            loss.set_yscale("log")
    steps, rates = points(records, "learning_rate", "train")
    if steps:
        rate.plot(steps, rates, color=COLORS[2])
        rate.ticklabel_format(axis="y", style="sci", scilimits=(-2, 3))
    rate.set(title="Learning rate", xlabel="step")
    _plot_throughput(speed, records, steady_state(records).samples_per_second)
    for axes in (loss, rate, speed):
        if not axes.lines:
            axes.text(0.5, 0.5, "no data yet", ha="center", va="center", transform=axes.transAxes, color="gray")
    return figure


def _plot_throughput(axes, records: list[dict[str, Any]], steady: float | None) -> None:
    """samples/s (left) and tokens/s (right); steps/s for parsed logs that give only that."""
    from nbtoolkit.metrics.plots import COLORS, points

    axes.set(title="Throughput", xlabel="step")
    xs, ys = points(records, "samples_per_second", "train")
    if not xs:
        xs, ys = points(records, "steps_per_second", "train")
        if xs:
            axes.plot(xs, ys, "o-", color=COLORS[0], markersize=3)
            axes.set_ylabel("steps/s")
        return
    axes.plot(xs, ys, "o-", color=COLORS[0], markersize=3)
    axes.set_ylabel("samples/s", color=COLORS[0])
    if steady:
        axes.axhline(steady, color=COLORS[0], linestyle=":", linewidth=1)
        axes.set_title(f"Throughput (steady {steady:.1f} samples/s)")
    tx, ty = points(records, "tokens_per_second", "train")
    if tx:
        tokens = axes.twinx()
        tokens.plot(tx, ty, "s--", color=COLORS[1], markersize=3)
        tokens.set_ylabel("tokens/s", color=COLORS[1])
