"""`%%track_metrics NAME`: what a cell prints becomes a metrics series and a live chart.

The tutorials run `!python run_glue.py ...` or stream a SageMaker job's log in a cell, then
`%%capture` it and pull dicts out with `literal_eval`. Here the cell's stdout and stderr are
teed (still shown, unless --quiet) into the same log parser the job supervisor uses, the
chart follows while the cell runs, and NAME ends up holding a DataFrame of the records
(`compare` takes it like a job).
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from contextlib import contextmanager
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring

from nbtoolkit.metrics.parse import LogParser
from nbtoolkit.notebook.charts import LiveChart, RunState


class CapturedSeries:
    """Metric records parsed from text as it is written (a MetricSource for LiveChart)."""

    def __init__(self, name: str) -> None:
        self.title = f"captured · {name}"
        self.name = name
        self.records: list[dict[str, Any]] = []
        self.started = time.time()
        self.ended: float | None = None
        self._parser = LogParser()
        self._unread: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def feed(self, text: str) -> None:
        with self._lock:
            self._add(self._parser.feed(text))

    def close(self) -> None:
        with self._lock:
            self._add(self._parser.flush())
            self.ended = time.time()

    def _add(self, records: list[dict[str, Any]]) -> None:
        self.records += records
        self._unread += records

    def read_new(self) -> list[dict[str, Any]]:
        with self._lock:
            unread, self._unread = self._unread, []
        return unread

    def state(self) -> RunState:
        ended = self.ended
        return RunState("done" if ended else "running", self.started, ended, ended is not None)

    def dataframe(self):
        import pandas as pd

        frame = pd.DataFrame(self.records)
        frame.attrs["name"] = self.name
        return frame


class Tee:
    """A stream's write, passed on (unless quiet) and fed to the series.

    Only whole lines go to the shared parser (progress bars end theirs with \\r), so stdout and
    stderr interleaving mid-line cannot garble a record.
    """

    def __init__(self, write: Callable[[str], Any], series: CapturedSeries, echo: bool = True) -> None:
        self._write, self._series, self._echo = write, series, echo
        self._partial = ""
        self._lock = threading.Lock()

    def write(self, text: str) -> int:
        with self._lock:
            whole = self._partial + str(text)
            end = max(whole.rfind("\n"), whole.rfind("\r")) + 1
            self._partial = whole[end:]
        if end:
            self._series.feed(whole[:end].replace("\r\n", "\n").replace("\r", "\n"))
        return self._write(text) if self._echo else len(text)

    def close(self) -> None:
        """Hand a last unterminated line to the series."""
        with self._lock:
            rest, self._partial = self._partial, ""
        if rest:
            self._series.feed(rest + "\n")


class _TeeProxy:
    """Stands in for a stream whose write cannot be replaced (a plain TextIOWrapper outside a kernel)."""

    def __init__(self, stream, tee: Tee) -> None:
        self._stream, self.write = stream, tee.write

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


@contextmanager
def tee_output(series: CapturedSeries, echo: bool = True):
    """Tee stdout and stderr into `series` for the duration of the block.

    In a kernel the streams' own `write` is wrapped, not just `sys.stdout` swapped: so logging
    handlers that hold the stream (a SageMaker SDK log stream), `!cmd` output (IPython prints
    what it reads from the command's pty) and what ipykernel forwards from the process's file
    descriptors are all seen.
    """
    tees, swapped = [], []
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        tee = Tee(stream.write, series, echo)
        tees.append(tee)
        try:
            stream.write = tee.write
        except (AttributeError, TypeError):
            setattr(sys, name, _TeeProxy(stream, tee))
            swapped.append((name, stream))
        else:
            swapped.append((None, stream))
    try:
        yield series
    finally:
        for (name, stream), tee in zip(swapped, tees, strict=False):
            if name is None:
                del stream.write
            else:
                setattr(sys, name, stream)
            tee.close()
        series.close()


@magics_class
class CaptureMagics(Magics):
    @magic_arguments()
    @argument("name", help="variable that receives the captured metrics as a pandas DataFrame")
    @argument("--quiet", action="store_true", help="do not show the cell's output (the chart still shows)")
    @argument("--no-chart", action="store_true", help="capture only; draw no live chart")
    @argument("--log-scale", action="store_true", help="draw loss on a log axis")
    @argument("--smoothing", type=float, default=0.6, help="moving-average weight over the raw loss, 0 to 0.99")
    @cell_magic
    def track_metrics(self, line: str, cell: str) -> None:
        """Run the cell, turning what it prints (Trainer logs, `!python run_glue.py`, a SageMaker
        log stream) into a metrics series NAME (a DataFrame) and a chart that follows it live.

            %%track_metrics native --quiet
            !python run_clm.py --model_name_or_path gpt2 ...
        """
        args = parse_argstring(self.track_metrics, line)
        if not args.name.isidentifier():
            raise UsageError(
                f"track_metrics name '{args.name}' is not a valid Python variable name; use letters, digits and _"
            )
        series = CapturedSeries(args.name)
        chart = None if args.no_chart else LiveChart(series, log_scale=args.log_scale, smoothing=args.smoothing)
        try:
            with tee_output(series, echo=not args.quiet):
                self.shell.run_cell(cell)
        finally:
            if chart is not None:
                chart.wait(timeout=60)
            self.shell.user_ns[args.name] = series.dataframe()
        kinds = [record["kind"] for record in series.records]
        print(
            f"[nbtoolkit] {args.name}: {len(kinds)} metric records ({kinds.count('train')} train, "
            f"{kinds.count('eval')} eval, {kinds.count('summary')} summary)"
        )
