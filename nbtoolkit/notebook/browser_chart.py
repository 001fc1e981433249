"""A job's chart drawn by the browser: the kernel sends one display message and nothing while jobs run.

The message is a job reference (JOB_MIME: the job ids and the chart's options) that the lab extension
renders as the panel's chart, polling the server's REST API until the jobs end; beside it, an image of
the chart as it is now (image/png, text/plain) for front ends without the extension (GitHub, nbconvert,
VS Code, classic Notebook). A watcher thread reads only the jobs' status from the store, and when every
job has ended it updates the output once (by its display id) with the final image, so a saved or
headless-run notebook keeps the end. Where the extension is absent, `live="kernel"` (or
NBTOOLKIT_CHART=kernel) draws the chart in the kernel instead (charts.LiveChart).
"""

from __future__ import annotations

import base64
import os
import threading
from collections.abc import Sequence
from typing import Any

from nbtoolkit.notebook.charts import ChartFigure, FollowingChart, JobSource, check_smoothing, live_chart, progress_line

#: the MIME type of a job reference; the lab extension's renderer (labextension/src/chart.ts) draws it
JOB_MIME = "application/vnd.nbtoolkit.job+json"
#: who draws a chart when the caller does not say: "browser" (the lab extension) or "kernel" (matplotlib here)
LIVE_ENV = "NBTOOLKIT_CHART"
LIVE_CHOICES = ("browser", "kernel")
#: how often the watcher reads the jobs' status (one store row each) to notice their end
WATCH_S = 1.0


class BrowserChart(FollowingChart):
    """One display output that the browser keeps live, and that ends holding the final image.

    Like LiveChart: `running`, `wait()`, `stop()`, `png` (the latest image), `redraws` (images drawn),
    `bundle` (the latest display data) and `error` (why the final update failed, if it did).
    """

    def __init__(
        self, jobs: Sequence[Any], *, log_scale: bool = False, smoothing: float = 0.6, show: bool = True
    ) -> None:
        check_smoothing(smoothing)
        self.jobs, self.log_scale, self.smoothing = list(jobs), log_scale, smoothing
        self.redraws = 0
        self.png: bytes | None = None
        self.error: BaseException | None = None
        super().__init__()
        ended = self._ended()
        self.bundle = self._bundle(final=ended)
        self._handle = _display(self.bundle) if show else None
        if ended:  # the image just sent is the final one
            self._done.set()
            return
        threading.Thread(target=self._watch, daemon=True, name=f"nbtoolkit-chart-watch {self.title}").start()

    @property
    def title(self) -> str:
        return ", ".join(f"job {job.id}" for job in self.jobs)

    def _ended(self) -> bool:
        return not any(job.record.active for job in self.jobs)

    def _watch(self) -> None:
        try:
            while not self._ended() and not self._stop.wait(WATCH_S):
                pass
            self.bundle = self._bundle(final=True)
            if self._handle is not None:
                self._handle.update(self.bundle, raw=True)
        except BaseException as exc:  # a chart must never take the kernel down: keep the reason
            self.error = exc
        finally:
            self._done.set()

    def _bundle(self, final: bool) -> dict[str, Any]:
        """The job reference, the state in words, and the chart as an image (while running, once there are metrics)."""
        reference = {
            "job_ids": [job.id for job in self.jobs],
            "options": {"log_scale": self.log_scale, "smoothing": self.smoothing},
        }
        image, text = self._image(final)
        bundle: dict[str, Any] = {JOB_MIME: reference, "text/plain": text}
        if image is not None:
            self.png, self.redraws = image, self.redraws + 1
            bundle["image/png"] = base64.b64encode(image).decode("ascii")
        return bundle

    def _image(self, final: bool) -> tuple[bytes | None, str]:
        """One job: the kernel chart's figure; several: their loss on one axes."""
        sources = [JobSource(job) for job in self.jobs]
        runs = [(source, source.state(), source.read_new()) for source in sources]
        lines = [f"{source.title}: {progress_line(records, state)}" for source, state, records in runs]
        if not final and not any(records for _, _, records in runs):  # nothing to draw yet
            return None, "\n".join(lines)
        if len(runs) == 1:
            ((_source, _, records),) = runs
            figure = ChartFigure(log_scale=self.log_scale, smoothing=self.smoothing)
            return figure.draw(records, lines[0].replace(": ", "\n", 1)), lines[0]
        return _compared(runs, self.log_scale, self.smoothing), "\n".join(lines)


def _compared(runs, log_scale: bool, smoothing: float) -> bytes:
    """Several jobs' train and eval loss on one axes, a colour each (as the browser draws them)."""
    from nbtoolkit.metrics.plots import COLORS, new_figure, plot_loss, png

    figure, axes = new_figure(8, 4)
    for index, (source, _, records) in enumerate(runs):
        plot_loss(axes, records, smoothing=smoothing, color=COLORS[index % len(COLORS)], label=source.title)
    if log_scale:
        axes.set_yscale("log")
    axes.set(title="Loss", xlabel="step")
    axes.legend(fontsize=8)
    return png(figure)


def _display(bundle: dict[str, Any]):
    """Show the bundle as an output to update later, when running under IPython (else None)."""
    from IPython.core.interactiveshell import InteractiveShell

    if not InteractiveShell.initialized():
        return None
    from IPython.display import display

    return display(bundle, raw=True, display_id=True)


def chart(jobs, *, live: str | None = None, log_scale: bool = False, smoothing: float = 0.6, show: bool = True):
    """The chart of one job or several (Job handles or ids): drawn by the browser (the lab extension) unless
    `live="kernel"` or NBTOOLKIT_CHART=kernel asks for the kernel-drawn chart (front ends without the extension).
    """
    from nbtoolkit.api import Job

    handles = [
        Job(job) if isinstance(job, str) else job for job in (jobs if isinstance(jobs, list | tuple) else [jobs])
    ]
    live = live or os.environ.get(LIVE_ENV) or "browser"
    if live not in LIVE_CHOICES:
        raise ValueError(
            f"live={live!r} is not a way to draw a chart; use 'browser' (the JupyterLab extension) "
            "or 'kernel' (matplotlib in the kernel, for front ends without it)"
        )
    if not handles:
        raise ValueError("chart() needs at least one job")
    if live == "kernel":
        if len(handles) > 1:
            raise ValueError(
                f"the kernel-drawn chart follows one job, not {len(handles)}; live='browser' draws several on one chart"
            )
        return live_chart(handles[0], log_scale=log_scale, smoothing=smoothing, show=show)
    return BrowserChart(handles, log_scale=log_scale, smoothing=smoothing, show=show)
