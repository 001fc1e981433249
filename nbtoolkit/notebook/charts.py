"""Live charts in a notebook: a job's loss, learning rate and throughput, redrawn as metrics arrive.

A background thread follows the metrics (a job's metrics.jsonl, or a cell's captured output),
redraws at most about once a second when something new arrived, and stops by itself when the
run ends. It draws at a lower priority and within a CPU budget, so watching a job on a small
machine does not slow the job. The chart is one display output updated in place (`display_id`), so JupyterLab,
headless nbclient and a saved notebook all end with the final image, no widget state needed.
"""

from __future__ import annotations

import base64
import contextlib
import html
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from nbtoolkit.metrics.series import METRICS_FILE, MetricsReader
from nbtoolkit.metrics.throughput import seconds_per_step
from nbtoolkit.runner.listing import cost_text, duration, status_text

#: at most one redraw per this many seconds while a run is going
REDRAW_INTERVAL_S = 1.0
#: how often the follower looks for new metrics
POLL_S = 0.25
#: the share of one core the follower may spend drawing: after a drawing that took c seconds of CPU it
#: waits at least c / DRAW_CPU_SHARE, so a chart never takes more than this from the run it watches
DRAW_CPU_SHARE = 0.05
#: how much lower than the kernel the drawing thread runs (Linux nice is per thread): the job comes first
DRAW_NICENESS = 10
#: live images are drawn a little smaller than comparison figures: cheaper to redraw, as legible on screen
LIVE_DPI = 80
#: rounds in a row that may fail (a busy job store, a file being replaced) before the chart gives up and says so
FAILED_ROUNDS = 3


@dataclass(frozen=True)
class RunState:
    """What the progress line needs besides the records: where the run is in its life."""

    status: str
    started: float | None
    ended: float | None
    finished: bool
    #: what the run has cost and will cost (`cost $0.12 · projected $0.40`); empty when it has no price
    cost: str = ""


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
        return RunState(status_text(record), record.started, record.ended, not record.active, cost_text(record))


class FollowingChart:
    """What both kinds of live chart share: a thread follows until the run ends (`_done`), or `stop()`
    asks it to end early (`_stop`); either way the output ends holding the last image."""

    def __init__(self) -> None:
        self._stop = threading.Event()
        self._done = threading.Event()

    @property
    def running(self) -> bool:
        return not self._done.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the run ended and the final image is in the output; False if `timeout` passed first."""
        return self._done.wait(timeout)

    def stop(self, timeout: float | None = 30.0) -> None:
        """Stop following now: the output is updated once more with the chart as it is."""
        self._stop.set()
        self._done.wait(timeout)


class LiveChart(FollowingChart):
    """Follows a MetricSource from a daemon thread and keeps one display output up to date.

    `redraws` counts the images drawn, `png` is the latest, `wait()` blocks until the run
    has ended and the final image is out, `stop()` ends following early (drawing once more).
    If following fails for good, `error` holds why and the display says so under the last image.
    """

    def __init__(
        self,
        source: MetricSource,
        *,
        log_scale: bool = False,
        smoothing: float = 0.6,
        interval: float = REDRAW_INTERVAL_S,
        show: bool = True,
    ) -> None:
        check_smoothing(smoothing)
        self.source, self.log_scale, self.smoothing, self.interval = source, log_scale, smoothing, interval
        self.records: list[dict[str, Any]] = []
        self.redraws = 0
        self.png: bytes | None = None
        self.bundle: dict[str, str] = {}  # the latest display data
        self.error: BaseException | None = None
        self._figure: ChartFigure | None = None  # built by the follower thread before its first drawing
        super().__init__()
        self._handle = _display_handle(source.title) if show else None
        if source.state().finished:  # an ended job: its final image now, so the output shows it when the cell ends
            self._follow()
            return
        self._thread = threading.Thread(
            target=self._follow_politely, daemon=True, name=f"nbtoolkit-chart {source.title}"
        )
        self._thread.start()

    def _follow_politely(self) -> None:
        _yield_to_others()
        self._follow()

    def _follow(self) -> None:
        drawn: tuple | None = None
        last_draw, gap, failures = float("-inf"), self.interval, 0
        try:
            while True:
                try:
                    state = self.source.state()  # before reading: records written before the end are all read
                    self.records += self.source.read_new()
                    final = state.finished or self._stop.is_set()
                    current = (len(self.records), state.status)
                    if current != drawn and (final or time.monotonic() - last_draw >= gap):
                        if self._figure is None:  # once: importing matplotlib and building the figure
                            self._figure = ChartFigure(log_scale=self.log_scale, smoothing=self.smoothing)
                        cpu = time.thread_time()
                        self._draw(state)
                        drawn, last_draw = current, time.monotonic()
                        gap = max(self.interval, (time.thread_time() - cpu) / DRAW_CPU_SHARE)
                    failures = 0
                except Exception:
                    failures += 1
                    if failures >= FAILED_ROUNDS:
                        raise
                    final = False
                if final:
                    return
                self._stop.wait(POLL_S)
        except BaseException as exc:  # a chart must never take the kernel down: keep the reason, and show it
            self.error = exc
            self._say_failed(exc)
        finally:
            self._done.set()

    def _say_failed(self, exc: BaseException) -> None:
        """Replace the display with the last image (if any) and one line saying the chart stopped, and why."""
        line = f"chart stopped following: {type(exc).__name__}: {exc}"
        bundle = {"text/plain": f"{self.source.title}: {line}"}
        image = f'<img src="data:image/png;base64,{base64.b64encode(self.png).decode("ascii")}"/>' if self.png else ""
        bundle["text/html"] = f"{image}<pre>{html.escape(bundle['text/plain'])}</pre>"
        with contextlib.suppress(Exception):
            self._publish(bundle)

    def _draw(self, state: RunState) -> None:
        line = progress_line(self.records, state)
        self.png = self._figure.draw(self.records, f"{self.source.title}\n{line}")
        self.redraws += 1
        self._publish(
            {"image/png": base64.b64encode(self.png).decode("ascii"), "text/plain": f"{self.source.title}: {line}"}
        )

    def _publish(self, bundle: dict[str, str]) -> None:
        self.bundle = bundle
        if self._handle is not None:
            self._handle.update(bundle, raw=True)

    def __repr__(self) -> str:
        state = "following" if self.running else f"failed: {self.error!r}" if self.error else "done"
        return f"<LiveChart {self.source.title!r} {state}, {self.redraws} redraws>"


def check_smoothing(smoothing: float) -> None:
    if not 0 <= smoothing < 1:
        raise ValueError(f"smoothing {smoothing} is out of range; use 0 (none) up to 0.99")


def live_chart(job, *, log_scale: bool = False, smoothing: float = 0.6, show: bool = True) -> LiveChart:
    """A live chart of a job (a Job handle or a job id): shown now, redrawn until the job ends.

    `smoothing` (0 to 0.99) is the weight of the moving average drawn over the raw loss;
    `log_scale` draws loss on a log axis. Returns at once: the kernel stays free.
    """
    if isinstance(job, str):
        from nbtoolkit.api import Job

        job = Job(job)
    return LiveChart(JobSource(job), log_scale=log_scale, smoothing=smoothing, show=show)


def _yield_to_others() -> None:
    """Lower this thread's priority (Linux: nice is per thread), so training on the same cores goes first."""
    try:
        thread = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, thread, min(19, os.getpriority(os.PRIO_PROCESS, thread) + DRAW_NICENESS))
    except (AttributeError, OSError):  # not Linux-like, or not allowed: draw at normal priority
        pass


def _display_handle(title: str):
    """A display output to update in place, when running under IPython (else None)."""
    from IPython.core.interactiveshell import InteractiveShell

    if not InteractiveShell.initialized():
        return None
    from IPython.display import display

    return display({"text/plain": f"{title}: waiting for metrics"}, raw=True, display_id=True)


def progress_line(records: list[dict[str, Any]], state: RunState, now: float | None = None) -> str:
    """`running · step 20/60 (33%) · elapsed 0:12 · remaining ~0:24 · loss 0.6931 · cost $0.12 · projected $0.40`

    Time left is the steps left at the steady pace (after the first logging window), else at the pace so far.
    """
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
            pace = seconds_per_step(records) or elapsed / step
            parts.append(f"remaining ~{duration(pace * (total - step))}")
    loss = next(
        (
            record["loss"]
            for record in reversed(records)
            if record.get("kind") == "train" and record.get("loss") is not None
        ),
        None,
    )
    if loss is not None:
        parts.append(f"loss {loss:.4f}")
    if state.cost:
        parts.append(state.cost)
    if not records:
        parts.append("waiting for metrics")
    return " · ".join(parts)


class ChartFigure:
    """The live chart's figure: loss (raw, smoothed, eval), learning rate, throughput.

    Built once per chart; each redraw only moves data and rescales, which costs about half of
    building a new figure (tick objects and axes are reused), so following a job stays cheap.
    """

    def __init__(self, *, log_scale: bool = False, smoothing: float = 0.6) -> None:
        from nbtoolkit.metrics.plots import COLORS, new_figure

        self.log_scale, self.smoothing = log_scale, smoothing
        self.figure, (self.loss, self.rate, self.speed) = new_figure(13, 3.8, dpi=LIVE_DPI, ncols=3)
        blue, orange, green = COLORS[0], COLORS[1], COLORS[2]
        (self.loss_raw,) = self.loss.plot([], [], color=blue, alpha=0.3, linewidth=1)
        (self.loss_line,) = self.loss.plot([], [], color=blue, linewidth=2, label="train loss")
        (self.eval_line,) = self.loss.plot(
            [], [], "o--", color=blue, markersize=4, linewidth=1, alpha=0.8, label="eval loss"
        )
        (self.rate_line,) = self.rate.plot([], [], color=green)
        (self.speed_line,) = self.speed.plot([], [], "o-", color=blue, markersize=3)
        self.steady_line = self.speed.axhline(0, color=blue, linestyle=":", linewidth=1)
        self.tokens = self.speed.twinx()
        (self.tokens_line,) = self.tokens.plot([], [], "s--", color=orange, markersize=3)
        self.tokens.set_ylabel("tokens/s", color=orange)
        self.loss.set(title="Loss", xlabel="step")
        self.rate.set(title="Learning rate", xlabel="step")
        self.speed.set_xlabel("step")
        self.rate.ticklabel_format(axis="y", style="sci", scilimits=(-2, 3))
        #: reward runs: one line per series, the spread band, and a right axis of completion length (GRPO)
        self.reward_lines: dict[str, Any] = {}
        self.reward_bands: list[Any] = []
        self.lengths: list[Any] = []
        self.empty = {
            axes: axes.text(0.5, 0.5, "no data yet", ha="center", va="center", transform=axes.transAxes, color="gray")
            for axes in (self.loss, self.rate, self.speed)
        }

    def draw(self, records: list[dict[str, Any]], title: str) -> bytes:
        """The chart of these records as PNG bytes."""
        from nbtoolkit.metrics.plots import png, points, smoothed
        from nbtoolkit.metrics.throughput import steady_state

        self.figure.suptitle(title, fontsize=10)
        steps, losses = points(records, "loss", "train")
        self.loss_raw.set_data(steps, losses if self.smoothing else [])
        self.loss_line.set_data(steps, smoothed(losses, self.smoothing))
        self.eval_line.set_data(*points(records, "eval_loss", "eval"))
        if self.log_scale and losses and self.loss.get_yscale() != "log":
            self.loss.set_yscale("log")
        self.rate_line.set_data(*points(records, "learning_rate", "train"))
        self._draw_rewards(records)
        self._draw_throughput(records, steady_state(records).samples_per_second)
        for axes in (self.loss, self.rate, self.speed, self.tokens, *self.lengths[:1]):
            axes.relim()
            axes.autoscale_view()
        shown = [line for line in (self.loss_line, self.eval_line) if len(line.get_xdata())]
        legend = self.loss.get_legend()
        if legend is not None:
            legend.remove()
        if shown:
            self.loss.legend(handles=shown, fontsize=8)
        for axes, note in self.empty.items():
            note.set_visible(not any(len(line.get_xdata()) for line in axes.lines if line is not self.steady_line))
        return png(self.figure)

    def _draw_rewards(self, records: list[dict[str, Any]]) -> None:
        """A run with rewards (DPO, a reward model, GRPO) shows them in the middle panel instead of the learning rate:
        DPO's chosen, rejected, margin and accuracy; a reward model's accuracy, margin and mean score; GRPO's reward per function, the total's spread (±1 std) and
        the completions' mean length on the right axis."""
        from nbtoolkit.metrics.plots import points
        from nbtoolkit.metrics.rewards import COMPLETION_LENGTH, SPREAD, TOTAL, reward_keys

        keys = reward_keys(records)
        if not keys:
            return
        self.rate_line.set_data([], [])
        self.rate.set(title="Rewards", ylabel="")
        for label, key in keys.items():
            if label not in self.reward_lines:
                (self.reward_lines[label],) = self.rate.plot([], [], label=label, linewidth=2 if key == TOTAL else 1)
            self.reward_lines[label].set_data(*points(records, key, "train"))
        for band in self.reward_bands:
            band.remove()
        steps, totals = points(records, TOTAL, "train")
        _, spreads = points(records, SPREAD, "train")
        if steps and len(spreads) == len(totals):
            low = [total - spread for total, spread in zip(totals, spreads, strict=True)]
            high = [total + spread for total, spread in zip(totals, spreads, strict=True)]
            self.reward_bands = [self.rate.fill_between(steps, low, high, alpha=0.15, color="gray")]
        length_steps, lengths = points(records, COMPLETION_LENGTH, "train")
        if length_steps:
            if not self.lengths:
                self.lengths.append(self.rate.twinx())
                self.lengths[0].set_ylabel("completion tokens", color="gray")
                self.lengths[0].plot([], [], ":", color="gray")
            self.lengths[0].lines[0].set_data(length_steps, lengths)
        self.rate.legend(fontsize=7, loc="upper left")

    def _draw_throughput(self, records: list[dict[str, Any]], steady: float | None) -> None:
        """samples/s (left) and tokens/s (right); steps/s for parsed logs that give only that."""
        from nbtoolkit.metrics.plots import points

        steps, speeds = points(records, "samples_per_second", "train")
        unit = "samples/s"
        if not steps:
            steps, speeds = points(records, "steps_per_second", "train")
            unit = "steps/s"
        self.speed_line.set_data(steps, speeds)
        self.speed.set_ylabel(unit if steps else "", color=self.speed_line.get_color())
        self.steady_line.set_ydata([steady or 0, steady or 0])
        self.steady_line.set_visible(bool(steady))
        self.speed.set_title(f"Throughput (steady {steady:.1f} samples/s)" if steady else "Throughput")
        token_steps, tokens = points(records, "tokens_per_second", "train")
        self.tokens_line.set_data(token_steps, tokens)
        self.tokens.set_visible(bool(token_steps))
