"""Runs side by side: steady-state throughput, time, loss, eval metrics and cost against a baseline.

`compare(runs)` takes job handles, job ids, series captured from a cell's output (the
DataFrames `%%track_metrics` leaves) or `RunMetrics`, and returns a `Comparison`: a pandas
table with one row per run and a figure (throughput bars, loss by step and by wall time).
Throughput is steady state (warm-up and compile time left out and reported apart), so a
compiled run is judged on its speed once warm *and* on whether its warm-up paid off.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from nbtoolkit.metrics.series import read_metrics
from nbtoolkit.metrics.throughput import steady_state
from nbtoolkit.runner.listing import cost_usd
from nbtoolkit.runner.store import JobRecord, JobStore

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

#: speed within this fraction of the baseline's counts as the same speed
SAME_SPEED = 0.02
#: eval numbers that describe the evaluation's speed, not the model
EVAL_TIMINGS = ("eval_runtime", "eval_samples_per_second", "eval_steps_per_second")


@dataclass
class RunMetrics:
    """One run to compare: a label, its metric records, and its job row when it is a job."""

    label: str
    records: list[dict[str, Any]]
    job: JobRecord | None = None

    @property
    def start(self) -> float | None:
        """When the run started: the job's start, else when its first logging window began."""
        if self.job is not None and self.job.started is not None:
            return self.job.started
        starts = [
            record["time"] - (_number(record.get("window_seconds")) or 0.0)
            for record in self.records
            if _number(record.get("time")) is not None
        ]
        return min(starts) if starts else None


@dataclass
class Comparison:
    """The result of `compare`: `.table` (one row per run, indexed by label) and `.figure()`."""

    runs: list[RunMetrics]
    table: pd.DataFrame
    baseline: str

    def verdicts(self) -> str:
        """One line per run that is not the baseline: faster or slower, and by how much."""
        return "\n".join(
            f"{label}: {verdict}" for label, verdict in self.table["verdict"].items() if label != self.baseline
        )

    def figure(self, smoothing: float = 0.6) -> Figure:
        """Throughput bars, and loss convergence by step and by wall time (a new Figure each call)."""
        from nbtoolkit.metrics.plots import COLORS, new_figure, plot_loss

        figure, (bars, by_step, by_time) = new_figure(15, 4.2, top=0.9, ncols=3)
        speeds = [_speed(row) for _, row in self.table.iterrows()]
        colors = [COLORS[index % len(COLORS)] for index in range(len(self.runs))]
        bars.bar(range(len(speeds)), [speed or 0 for speed in speeds], color=colors, width=0.6)
        for index, (speed, speedup) in enumerate(zip(speeds, self.table["speedup"], strict=False)):
            note = "n/a" if speed is None else f"{speed:.1f}" + ("" if _missing(speedup) else f"\n{speedup:.2f}x")
            bars.annotate(note, (index, speed or 0), ha="center", va="bottom", fontsize=9)
        bars.set_xticks(range(len(speeds)), list(self.table.index), rotation=10)
        bars.set_ylabel("samples/s, steady state")
        bars.set_title("Training throughput (higher is better)")
        bars.margins(y=0.2)
        for run, color in zip(self.runs, colors, strict=False):
            plot_loss(by_step, run.records, smoothing=smoothing, color=color, label=run.label)
            plot_loss(
                by_time,
                run.records,
                x="time",
                start=run.start or 0.0,
                smoothing=smoothing,
                color=color,
                label=run.label,
            )
        by_step.set(title="Training loss by step", xlabel="step", ylabel="loss")
        by_time.set(title="Training loss by wall time", xlabel="seconds since the run started", ylabel="loss")
        for axes in (by_step, by_time):
            if axes.lines:
                axes.legend(fontsize=8)
        return figure

    def _ipython_display_(self) -> None:
        from IPython.display import HTML, Image, display

        from nbtoolkit.metrics.plots import png

        verdicts = "".join(f"<li>{line}</li>" for line in self.verdicts().splitlines())
        display(HTML(f"<ul>{verdicts}</ul>{self.table.to_html(float_format=lambda value: f'{value:.4g}')}"))
        display(Image(png(self.figure()), format="png"))

    def __repr__(self) -> str:
        return f"{self.table.to_string(float_format=lambda value: f'{value:.4g}')}\n{self.verdicts()}"


def compare(
    runs: Sequence[Any] | Mapping[str, Any],
    baseline: Any = None,
    *,
    warmup_steps: int | None = None,
    store: JobStore | None = None,
) -> Comparison:
    """Compare runs (jobs, job ids, captured DataFrames or RunMetrics; a dict names them).

    `baseline` (a label, an index, or one of the runs; default the first) is what speed-up,
    time saved and cost saved are measured against. `warmup_steps` overrides where steady
    state starts (default: after the first logging window).
    """
    import pandas as pd

    items: list[tuple[str | None, Any]] = (
        list(runs.items()) if isinstance(runs, Mapping) else [(None, run) for run in runs]
    )
    if not items:
        raise ValueError("compare needs at least one run; give jobs, job ids or captured series")
    loaded = _unique_labels([run_metrics(run, label, store) for label, run in items])
    base = loaded[_baseline_index(baseline, items, loaded)]
    rows = {run.label: run_summary(run, warmup_steps) for run in loaded}
    for label, row in rows.items():
        row.update(relative_to(row, rows[base.label], is_baseline=label == base.label))
    table = pd.DataFrame.from_dict(rows, orient="index")
    if table["hourly_price_usd"].isna().all():
        table = table.drop(columns=["hourly_price_usd", "cost_usd", "cost_saved_usd"])
    return Comparison(runs=loaded, table=table, baseline=base.label)


def run_metrics(run: Any, label: str | None = None, store: JobStore | None = None) -> RunMetrics:
    """Load one run: a RunMetrics, a job id, a DataFrame of records, or a Job handle."""
    if isinstance(run, RunMetrics):
        return RunMetrics(label or run.label, run.records, run.job)
    if isinstance(run, str):
        store = store or JobStore()
        record = store.get(run)
        return RunMetrics(label or record.name, read_metrics(store.job_dir(record.id)), record)
    if hasattr(run, "to_dict") and hasattr(run, "columns"):  # a pandas DataFrame of records
        records = [{key: value for key, value in row.items() if not _missing(value)} for row in run.to_dict("records")]
        return RunMetrics(label or str(run.attrs.get("name", "captured")), records)
    if hasattr(run, "record") and hasattr(run, "records"):  # nbtoolkit.api.Job
        record = run.record
        return RunMetrics(label or record.name, run.records(), record)
    raise TypeError(
        f"cannot compare {type(run).__name__}; give a Job, a job id, a DataFrame of metric records or a RunMetrics"
    )


def run_summary(run: RunMetrics, warmup_steps: int | None = None) -> dict[str, Any]:
    """The absolute numbers of one run (a table row before the baseline columns)."""
    records = run.records
    train = [record for record in records if record.get("kind") == "train"]
    evals = [record for record in records if record.get("kind") == "eval"]
    summary: dict[str, Any] = next((record for record in reversed(records) if record.get("kind") == "summary"), {})
    throughput = steady_state(records, warmup_steps)
    losses = [record["loss"] for record in train if _number(record.get("loss")) is not None]
    eval_losses = [record["eval_loss"] for record in evals if _number(record.get("eval_loss")) is not None]
    steps = [record["step"] for record in records if _number(record.get("step")) is not None]
    job = run.job
    row: dict[str, Any] = {
        "job": job.id if job else None,
        "status": job.status if job else "captured",
        "steps": int(max(steps)) if steps else None,
        "samples_per_second": throughput.samples_per_second,
        "tokens_per_second": throughput.tokens_per_second,
        "trainer_samples_per_second": summary.get("train_samples_per_second"),
        "warmup_seconds": throughput.warmup_seconds,
        "warmup_overhead_seconds": warmup_overhead(train, throughput),
        "train_seconds": summary.get("train_runtime"),
        "total_seconds": total_seconds(run, summary),
        "final_loss": losses[-1] if losses else None,
        "best_loss": min(losses) if losses else None,
        "best_eval_loss": min(eval_losses) if eval_losses else None,
    }
    final_eval = evals[-1] if evals else {}
    row.update(
        {
            key: value
            for key, value in final_eval.items()
            if key.startswith("eval_") and key not in EVAL_TIMINGS and _number(value) is not None
        }
    )
    price = job.info.get("hourly_price_usd") if job else None
    row["hourly_price_usd"] = price
    row["cost_usd"] = cost_usd(job) if job and price is not None else None
    return row


def warmup_overhead(train: list[dict[str, Any]], throughput) -> float | None:
    """Seconds the warm-up windows took beyond what their samples take at steady speed (compile cost)."""
    if not throughput.samples_per_second or not throughput.warmup_seconds:
        return None
    done = sum(
        record["samples_per_second"] * float(record.get("window_seconds") or 1.0)
        for record in train
        if record.get("samples_per_second")
    )
    warm_samples = done - throughput.samples_per_second * throughput.steady_seconds
    return throughput.warmup_seconds - warm_samples / throughput.samples_per_second


def total_seconds(run: RunMetrics, summary: dict[str, Any]) -> float | None:
    """Wall time of the whole run: the job's (start to end, or to now while running), else the log's."""
    if run.job is not None and run.job.elapsed is not None:
        return run.job.elapsed
    if _number(summary.get("train_runtime")) is not None:
        return float(summary["train_runtime"])
    times = [record["time"] for record in run.records if _number(record.get("time")) is not None]
    start = run.start
    return max(times) - start if times and start is not None and max(times) > start else None


def relative_to(row: dict[str, Any], base: dict[str, Any], is_baseline: bool) -> dict[str, Any]:
    """Speed-up, time and cost saved against the baseline row, and a verdict in words."""
    speed, base_speed = _speed(row), _speed(base)
    speedup = speed / base_speed if speed and base_speed else None
    total, base_total = row["total_seconds"], base["total_seconds"]
    saved = base_total - total if total is not None and base_total is not None else None
    cost, base_cost = row["cost_usd"], base["cost_usd"]
    return {
        "speedup": speedup,
        "time_saved_seconds": saved,
        "time_saved_pct": 100 * saved / base_total if saved is not None and base_total else None,
        "cost_saved_usd": base_cost - cost if cost is not None and base_cost is not None else None,
        "verdict": "baseline" if is_baseline else verdict(speedup, saved, row, base),
    }


def verdict(speedup: float | None, saved: float | None, row: dict[str, Any], base: dict[str, Any]) -> str:
    """Faster or slower, in words; honest when a faster steady state did not repay its warm-up."""
    if speedup is None:
        return "no throughput to compare (no samples/s in its records)"
    if speedup < 1 - SAME_SPEED:
        return f"slower: {speedup:.2f}x the baseline's throughput" + _time_note(saved)
    if speedup <= 1 + SAME_SPEED:
        return f"about the same speed ({speedup:.2f}x)" + _time_note(saved)
    if saved is not None and saved < 0:
        extra = (row["warmup_overhead_seconds"] or 0) - (base["warmup_overhead_seconds"] or 0)
        pays_off = (
            f"; its {extra:.0f}s extra warm-up pays off after about {extra / (1 - 1 / speedup):.0f}s of training"
            if extra > 0
            else ""
        )
        return f"{speedup:.2f}x faster once warm, but {-saved:.1f}s slower in total{pays_off}"
    return f"{speedup:.2f}x faster" + _time_note(saved)


def _time_note(saved: float | None) -> str:
    if saved is None:
        return ""
    return f", {saved:.1f}s saved in total" if saved >= 0 else f", {-saved:.1f}s slower in total"


def _speed(row: Mapping[str, Any]) -> float | None:
    """Steady samples/s, else the Trainer's own average (captured logs without windows)."""
    for key in ("samples_per_second", "trainer_samples_per_second"):
        if not _missing(row.get(key)):
            return float(row[key])
    return None


def _baseline_index(baseline: Any, items: list[tuple[str | None, Any]], loaded: list[RunMetrics]) -> int:
    if baseline is None:
        return 0
    if isinstance(baseline, int) and not isinstance(baseline, bool) and 0 <= baseline < len(loaded):
        return baseline
    for index, ((key, run), metrics) in enumerate(zip(items, loaded, strict=False)):
        if baseline is run or baseline in (key, metrics.label) or (metrics.job and baseline == metrics.job.id):
            return index
    labels = ", ".join(repr(run.label) for run in loaded)
    raise ValueError(
        f"baseline {baseline!r} is not one of the compared runs; give one of them, its label ({labels}) or its index"
    )


def _unique_labels(runs: list[RunMetrics]) -> list[RunMetrics]:
    """Labels are the table's index: add the job id (or a number) to labels that repeat."""
    seen = [run.label for run in runs]
    for index, run in enumerate(runs):
        if seen.count(run.label) > 1:
            run.label = f"{run.label} ({run.job.id if run.job else index})"
    return runs


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))
