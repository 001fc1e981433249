"""Drawing metric series with matplotlib's object API (no pyplot, no global state).

Shared by the notebook's live charts and by comparisons: a figure that renders off-screen
to PNG from any thread, loss curves (raw and smoothed), and the series a panel plots.
Importing this module imports matplotlib: the light modules import it inside functions.
"""

from __future__ import annotations

import io
from collections.abc import Iterable
from typing import Any

from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

#: one colour per run, in order (matplotlib's default cycle, named so bars and curves agree)
COLORS = ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown", "tab:pink", "tab:gray")
DPI = 100


def new_figure(width: float, height: float, top: float = 0.8, dpi: int = DPI, **subplots: Any) -> tuple[Figure, Any]:
    """A Figure with an Agg canvas attached (safe off the main thread) and its axes.

    Fixed margins, not a layout engine: constrained layout made each live redraw 3-5x slower.
    """
    figure = Figure(figsize=(width, height), dpi=dpi)
    FigureCanvasAgg(figure)
    figure.subplots_adjust(left=0.06, right=0.94, bottom=0.14, top=top, wspace=0.32)
    return figure, figure.subplots(**subplots)


def png(figure: Figure) -> bytes:
    """The figure as PNG, lightly compressed: encoding at zlib's default level was a sixth of a redraw."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", pil_kwargs={"compress_level": 1})
    return buffer.getvalue()


def smoothed(values: list[float], weight: float) -> list[float]:
    """Exponential moving average (0 <= weight < 1), debiased so early points are not pulled to zero."""
    result, average = [], 0.0
    for count, value in enumerate(values, start=1):
        average = weight * average + (1 - weight) * value
        result.append(average / (1 - weight**count))
    return result


def points(
    records: Iterable[dict[str, Any]], key: str, kind: str, x: str = "step", start: float = 0.0
) -> tuple[list[float], list[float]]:
    """(x, y) of `key` over the records of one kind; x is the step or seconds since `start`."""
    xs, ys = [], []
    for record in records:
        value = record.get(key)
        if record.get("kind") != kind or value is None or record.get(x) is None:
            continue
        xs.append(record[x] - start if x == "time" else record[x])
        ys.append(value)
    return xs, ys


def plot_loss(
    axes: Axes,
    records: list[dict[str, Any]],
    *,
    x: str = "step",
    start: float = 0.0,
    smoothing: float = 0.0,
    color: str = COLORS[0],
    label: str | None = None,
) -> None:
    """Train loss (faint raw line, solid smoothed line) and eval loss (markers) of one run."""
    xs, ys = points(records, "loss", "train", x, start)
    if xs:
        if smoothing:
            axes.plot(xs, ys, color=color, alpha=0.3, linewidth=1)
            axes.plot(xs, smoothed(ys, smoothing), color=color, linewidth=2, label=label or "train loss")
        else:
            axes.plot(xs, ys, color=color, linewidth=1.5, label=label or "train loss")
    ex, ey = points(records, "eval_loss", "eval", x, start)
    if ex:
        axes.plot(
            ex,
            ey,
            "o--",
            color=color,
            markersize=4,
            linewidth=1,
            alpha=0.8,
            label=f"{label} (eval)" if label else "eval loss",
        )
