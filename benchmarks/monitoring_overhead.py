"""Monitoring overhead with the chart open in a real JupyterLab page: the kernel's CPU share, and samples/s.

A JupyterLab server (tests/ui's) and headless Chromium show a notebook whose cell charts the newest job
(`jobs()[0].chart()`: drawn by the browser, which polls the REST API). Jobs alternate in ABBA order
(plain, charted, charted, plain, ...) in the server's job store, so machine load drifts evenly over both;
a plain job runs with the same page open and no chart cell run. Each job's speed is its steady-state
samples/s from its own metrics. Printed per pair: both speeds, their ratio, the kernel's CPU share
while the charted job ran (psutil: the kernel process's CPU seconds / wall seconds, from the chart cell's
end to the job's end) and the Jupyter server's share while each job ran; then the median ratio (goal >= 0.99)
and the median kernel share (goal < 1% of one core). `--kernel-chart-runs N` adds N charted jobs drawn by the
kernel (`live="kernel"`) for comparison.

On a training host the browser runs on the user's laptop, not beside the job: by default (`--pin browser`)
Chromium runs on the machine's last core(s) and everything else (the job, the Jupyter server, the kernel) on
the others, so the figure is the server's and the kernel's cost, not the browser's. `--pin browser+server`
moves the server there too; `--pin none` shares every core. A machine of one core pins nothing.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/monitoring_overhead.py [--pairs 6] [--steps 12000] [--pin browser]
    PYTHONPATH=$PWD .venv/bin/python benchmarks/monitoring_overhead.py --block-s 20 --pairs 8   # interleaved

`--block-s S`: one long job charted in the page, the page shown and hidden (JupyterLab's polls stand by, as for a
background tab) in alternate blocks of S seconds, ABBA by pair: whole jobs swing 20-30% in speed on this idle VM.
Each pair also gives the page's requests per second by kind, and the summary the plain blocks' own spread.
`--panel` opens the job panel in the sidebar as well (its list is read every 2 s while a job runs).
The server runs nbtoolkit at a user's default settings (the browser tests make the panel refresh 4x faster);
batches have fixed shapes, so a block's speed does not depend on which batches it drew.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import os
import re
import statistics
import tempfile
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import psutil
from playwright.sync_api import Page, expect

from nbtoolkit.api import Job, launch
from nbtoolkit.metrics.throughput import steady_state
from nbtoolkit.runner import JobStore
from tests.ui.conftest import USER_SETTINGS, Lab, chromium, lab_server, run_first_cell, write_notebook
from tests.ui.test_jobs_panel import open_panel

#: the notebook's cells: an import (run once, so the kernel is up), then the chart of the newest job
CELLS = ("from nbtoolkit.api import jobs", "chart = jobs()[0].chart()", "chart = jobs()[0].chart(live='kernel')")
BROWSER, KERNEL = 1, 2
#: nbtoolkit's panel as a user has it (the browser tests make it poll 4x faster); no news fetched from the web
USER_DEFAULTS = {plugin: values for plugin, values in USER_SETTINGS.items() if not plugin.startswith("nbtoolkit/")}


def tiny_spec(steps: int) -> dict:
    return {
        "task": "text-classification",
        "dataset": {"eval_split": None, "pad_to_max_length": True, "max_length": 64},
        "train": {"max_steps": steps, "batch_size": 16, "learning_rate": 0.003, "logging_steps": 50},
    }


@dataclass(frozen=True)
class Run:
    samples_per_second: float
    wall_s: float
    #: the kernel's CPU seconds per wall second while the job ran (None for a plain run)
    kernel_share: float | None
    #: the Jupyter server's CPU seconds per wall second while the job ran
    server_share: float


def split_cores(pin: str) -> tuple[set[int], set[int], set[int]]:
    """(the job's cores, the browser's, the server's): the browser (and with `browser+server` the server) on the
    last quarter of this process's cores (at least one), the job on the rest; all shared with `none` or one core."""
    cores = sorted(os.sched_getaffinity(0))
    if pin == "none" or len(cores) < 2:
        return set(cores), set(cores), set(cores)
    watching = set(cores[-max(1, len(cores) // 4) :])
    job = set(cores) - watching
    return job, watching, watching if pin == "browser+server" else job


def lab_process(lab: Lab) -> psutil.Process:
    """The Jupyter server's process (serving lab.url's port)."""
    port = int(lab.url.rstrip("/").rsplit(":", 1)[1])
    for process in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            if "jupyterlab" in process.cmdline() and f"--port={port}" in process.cmdline():
                return process
    raise RuntimeError(f"no Jupyter server process on port {port}")


def kernel_of(lab: Lab) -> psutil.Process:
    """The process of the notebook's kernel (the server's only session)."""
    with urllib.request.urlopen(f"{lab.url}api/sessions?token={lab.token}") as response:
        (session,) = json.load(response)
    kernel_id = session["kernel"]["id"]
    for process in psutil.process_iter(["cmdline"]):
        if any(kernel_id in part for part in process.info["cmdline"] or ()):
            return process
    raise RuntimeError(f"no process runs kernel {kernel_id}")


def cpu_seconds(process: psutil.Process) -> float:
    times = process.cpu_times()
    return times.user + times.system


def run_cell(page: Page, index: int) -> None:
    """Run one cell in place and wait until the kernel has run it."""
    cell = page.locator(".jp-Notebook .jp-CodeCell").nth(index)
    prompt = cell.locator(".jp-InputPrompt")
    before = prompt.inner_text()
    prompt.click()
    page.keyboard.press("Control+Enter")
    expect(prompt).not_to_have_text(before, timeout=60_000)
    expect(prompt).to_have_text(re.compile(r"\[\d+\]"), timeout=60_000)


def run_job(
    spec: dict, store: JobStore, page: Page, kernel: psutil.Process, server: psutil.Process, chart_cell: int | None
) -> Run:
    """One job, charted by the notebook's cell `chart_cell` (or not charted)."""
    job: Job = launch(spec, store=store)
    share = None
    if chart_cell is not None:
        run_cell(page, chart_cell)
    cpu, server_cpu, started = cpu_seconds(kernel), cpu_seconds(server), time.monotonic()
    status = job.wait()
    wall = time.monotonic() - started
    if chart_cell is not None:
        share = (cpu_seconds(kernel) - cpu) / wall
    if status != "succeeded":
        raise SystemExit(f"job {job.id} {status}: {job.record.message}")
    server_share = (cpu_seconds(server) - server_cpu) / wall
    return Run(steady_state(job.records()).samples_per_second, job.record.elapsed, share, server_share)


#: JupyterLab's polls stand by while `document.hidden` (a tab in the background): set it, and say so
HIDE_PAGE = """hidden => {
  Object.defineProperty(document, 'hidden', {get: () => hidden, configurable: true});
  Object.defineProperty(document, 'visibilityState', {get: () => hidden ? 'hidden' : 'visible', configurable: true});
  document.dispatchEvent(new Event('visibilitychange'));
}"""


def speed_between(records: list[dict], start: float, end: float, batch: int) -> float:
    """Samples/s from the train records logged between `start` and `end` (wall clock)."""
    inside = [r for r in records if r["kind"] == "train" and start <= r["time"] <= end]
    first, last = inside[0], inside[-1]
    return (last["step"] - first["step"]) * batch / (last["time"] - first["time"])


def interleaved(args, spec: dict, store: JobStore, page: Page, kernel: psutil.Process, server: psutil.Process):
    """One long job, its chart open in the page; the page shown (charted) and hidden (its polls stand by: plain) in
    alternate blocks of `--block-s` seconds, ABBA by pair. On this VM whole jobs swing 20-30% in speed on an idle
    host; adjacent blocks of one job share the machine's state. The first `--settle-s` of a block are not counted."""
    job: Job = launch({**spec, "train": {**spec["train"], "max_steps": 10**6}}, store=store)
    run_cell(page, BROWSER)
    browser = [p for p in psutil.Process().children(recursive=True) if "chromium" in p.name()]
    requests = RequestLog(page)
    blocks = []  # (charted, start, end, {kernel, server, browser: CPU share})
    try:
        for pair in range(args.pairs):
            for charted in (False, True) if pair % 2 == 0 else (True, False):
                page.evaluate(HIDE_PAGE, not charted)
                page.wait_for_timeout(args.settle_s * 1000)  # (the page's events are seen while Playwright waits)
                watched = {"kernel": [kernel], "server": [server], "browser": browser}
                start, before = time.time(), {name: total_cpu(procs) for name, procs in watched.items()}
                page.wait_for_timeout(args.block_s * 1000)
                end = time.time()
                shares = {name: (total_cpu(procs) - before[name]) / (end - start) for name, procs in watched.items()}
                blocks.append((charted, start, end, shares))
    finally:
        job.stop()
    records, batch = job.records(), spec["train"]["batch_size"]
    ratios, kernel_shares, plain_speeds = [], [], []
    for pair in range(args.pairs):
        measured = {
            charted: (speed_between(records, start, end, batch), shares)
            for charted, start, end, shares in blocks[2 * pair : 2 * pair + 2]
        }
        (plain, quiet), (watched, busy) = measured[False], measured[True]
        windows = {charted: (start, end) for charted, start, end, _ in blocks[2 * pair : 2 * pair + 2]}
        ratios.append(watched / plain)
        kernel_shares.append(busy["kernel"])
        plain_speeds.append(plain)
        print(
            f"pair {pair + 1}: plain {plain:7.1f} samples/s | charted {watched:7.1f} samples/s | ratio {ratios[-1]:.3f} "
            f"| kernel CPU {100 * busy['kernel']:.2f}% of a core | server CPU {100 * quiet['server']:.2f}% plain, "
            f"{100 * busy['server']:.2f}% charted | browser CPU {100 * quiet['browser']:.1f}% plain, "
            f"{100 * busy['browser']:.1f}% charted | the page's requests/s plain: "
            f"{requests.rates(*windows[False])}; charted: {requests.rates(*windows[True])}",
            flush=True,
        )
    quartiles = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else ratios * 3
    print(
        f"median charted/plain {statistics.median(ratios):.3f} (goal >= 0.99) over {len(ratios)} interleaved pairs "
        f"of {args.block_s:.0f} s blocks (middle half {quartiles[0]:.3f}-{quartiles[2]:.3f}, range "
        f"{min(ratios):.3f}-{max(ratios):.3f}); kernel CPU while charted: median "
        f"{100 * statistics.median(kernel_shares):.2f}% of a core (goal < 1%); the plain blocks alone spread "
        f"{100 * statistics.pstdev(plain_speeds) / statistics.mean(plain_speeds):.0f}% (coefficient of variation): "
        "what the machine itself varies",
        flush=True,
    )


class RequestLog:
    """The page's requests to the server, by kind (nbtoolkit's list, job, metrics, log; JupyterLab's own), timed."""

    def __init__(self, page: Page) -> None:
        self.seen: list[tuple[float, str]] = []
        page.on("request", lambda request: self.seen.append((time.time(), request_kind(request.url))))

    def rates(self, start: float, end: float) -> str:
        kinds = collections.Counter(kind for at, kind in self.seen if start <= at <= end)
        return ", ".join(f"{kind} {count / (end - start):.2f}" for kind, count in sorted(kinds.items())) or "none"


def request_kind(url: str) -> str:
    path = urllib.parse.urlsplit(url).path
    found = re.search(r"/nbtoolkit/api/jobs(/[0-9a-f]{8})?(/\w+)?$", path)
    if not found:
        return "jupyterlab"
    return found.group(2)[1:] if found.group(2) else "job" if found.group(1) else "list"


def total_cpu(processes: list[psutil.Process]) -> float:
    """CPU seconds of these processes (those that ended count no more)."""
    total = 0.0
    for process in processes:
        with contextlib.suppress(psutil.Error):
            total += cpu_seconds(process)
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=6)
    parser.add_argument("--steps", type=int, default=12000, help="steps per job (a minute or more each)")
    parser.add_argument("--kernel-chart-runs", type=int, default=1)
    parser.add_argument("--pin", choices=("browser", "browser+server", "none"), default="browser")
    parser.add_argument(
        "--block-s", type=float, default=0, help="one job, the page shown and hidden in alternate blocks of this long"
    )
    parser.add_argument("--settle-s", type=float, default=4, help="(with --block-s) not counted at each block's start")
    parser.add_argument(
        "--panel", action="store_true", help="open the job panel in the sidebar too (its list is read every 2 s)"
    )
    args = parser.parse_args()
    spec = tiny_spec(args.steps)
    base = Path(tempfile.mkdtemp(prefix="nbtoolkit-bench-"))
    job_cores, browser_cores, server_cores = split_cores(args.pin)
    with contextlib.ExitStack() as started:
        # each process takes the cores of the process that starts it: this one's, set just before
        os.sched_setaffinity(0, server_cores)
        lab = started.enter_context(lab_server(base / "lab", USER_DEFAULTS))
        os.sched_setaffinity(0, browser_cores)
        browser = started.enter_context(chromium(base / "chromium"))
        os.sched_setaffinity(0, job_cores)  # the jobs' supervisors and ranks
        store = JobStore(lab.home)
        server = lab_process(lab)
        write_notebook(lab.root_dir / "bench.ipynb", *CELLS)
        page = browser.new_page()
        page.set_default_timeout(60_000)
        page.goto(lab.tree("bench.ipynb"))
        run_first_cell(page)
        if args.panel:
            open_panel(page)
        kernel = kernel_of(lab)
        print(
            f"{os.cpu_count()} cores; the job on {sorted(job_cores)}, the server and its kernel on "
            f"{sorted(server_cores)}, the browser on {sorted(browser_cores)} (--pin {args.pin}); the job panel "
            f"{'open' if args.panel else 'closed'}; load average "
            f"{os.getloadavg()[0]:.2f} at the start",
            flush=True,
        )
        if args.block_s:
            interleaved(args, spec, store, page, kernel, server)
            return
        ratios, shares = [], []
        for pair in range(args.pairs):
            order = (None, BROWSER) if pair % 2 == 0 else (BROWSER, None)
            runs = {cell: run_job(spec, store, page, kernel, server, cell) for cell in order}
            plain, charted = runs[None], runs[BROWSER]
            ratios.append(charted.samples_per_second / plain.samples_per_second)
            shares.append(charted.kernel_share)
            print(
                f"pair {pair + 1}: plain {plain.samples_per_second:7.1f} samples/s ({plain.wall_s:.0f} s) | "
                f"charted {charted.samples_per_second:7.1f} samples/s ({charted.wall_s:.0f} s) | "
                f"ratio {ratios[-1]:.3f} | kernel CPU {100 * charted.kernel_share:.2f}% of a core | "
                f"server CPU {100 * plain.server_share:.2f}% plain, {100 * charted.server_share:.2f}% charted | "
                f"load {os.getloadavg()[0]:.2f}",
                flush=True,
            )
        if ratios:
            print(
                f"median charted/plain {statistics.median(ratios):.3f} (goal >= 0.99) over {len(ratios)} pairs "
                f"(range {min(ratios):.3f}-{max(ratios):.3f}); kernel CPU while charted: median "
                f"{100 * statistics.median(shares):.2f}% of a core (goal < 1%)",
                flush=True,
            )
        for number in range(args.kernel_chart_runs):
            run = run_job(spec, store, page, kernel, server, KERNEL)
            print(
                f"kernel-drawn chart {number + 1}: {run.samples_per_second:.1f} samples/s ({run.wall_s:.0f} s); "
                f"kernel CPU {100 * run.kernel_share:.2f}% of a core",
                flush=True,
            )


if __name__ == "__main__":
    main()
