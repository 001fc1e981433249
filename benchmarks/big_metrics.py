"""A job with a 300 MB metrics.jsonl: what opening it costs the server (target: GET < 1 s, RSS growth < 50 MB).

Writes an ended job whose metrics.jsonl holds `--mb` megabytes of train records (an eval every 500
steps), starts a real Jupyter server with the nbtoolkit extension, and times what the panel asks when
a user opens the job: the detail (GET /jobs/ID), the chart's first read (metrics?since=0&points=500,
downsampled) and a poll after it (since=next), each a few times, with the server's RSS before and
after, and the server's CPU time per request (wall time depends on what else the machine runs). `--running` leaves the job running instead (its supervisor: this process), as a chart's polls
see it. Issue 24 measured 13.2 s and +2.9 GB for the detail of a 285 MiB file before these reads.

    .venv/bin/python benchmarks/big_metrics.py [--mb 300] [--repeat 5]
"""

from __future__ import annotations

import argparse
import http.client
import os
import secrets
import statistics
import sys
import tempfile
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from list_endpoint import free_port, start_server, timed

from nbtoolkit.metrics.series import METRICS_FILE
from nbtoolkit.runner.store import LOG_FILE, JobStore

TARGET_S, TARGET_RSS_MB = 1.0, 50.0


def write_job(home: Path, megabytes: int, running: bool) -> str:
    """An ended (or running) job with about `megabytes` MB of metrics."""
    store = JobStore(home)
    record = store.create(name="big", task="causal-lm", backend="local", info={"hourly_price_usd": 4.1})
    directory = store.job_dir(record.id)
    (directory / LOG_FILE).write_text("training\n" * 1000)
    target, step = megabytes * 1_000_000, 0
    with open(directory / METRICS_FILE, "w") as metrics:
        while metrics.tell() < target:
            lines = []
            for _ in range(10_000):
                step += 1
                lines.append(
                    f'{{"time": {1e9 + step}, "step": {step}, "epoch": {step / 1e5}, "kind": "train", '
                    f'"loss": {2.0 + (step * 7919 % 1000) / 1000.0}, "learning_rate": 5e-05, "grad_norm": 1.25, '
                    f'"samples_per_second": 120.5, "tokens_per_second": 15000.0, "max_steps": 99999999}}\n'
                )
                if step % 500 == 0:
                    lines.append(f'{{"time": {1e9 + step}, "step": {step}, "kind": "eval", "eval_loss": 2.5}}\n')
            metrics.write("".join(lines))
    me = psutil.Process()
    store.update(
        record.id,
        status="running" if running else "succeeded",
        started=1e9,
        ended=None if running else 1e9 + 36000,
        step=step,
        total_steps=99999999,
        loss=2.0,
        samples_per_second=120.5,
        supervisor_pid=me.pid if running else None,
        supervisor_started=me.create_time() if running else None,
    )
    return record.id


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=300, help="size of metrics.jsonl in MB")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--running", action="store_true", help="the job is running rather than ended")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="nbtoolkit-bench-") as tmp:
        home, root = Path(tmp) / "home", Path(tmp) / "root"
        root.mkdir()
        started = time.perf_counter()
        job_id = write_job(home, args.mb, args.running)
        size = (JobStore(home).job_dir(job_id) / METRICS_FILE).stat().st_size
        print(
            f"job {job_id}: metrics.jsonl {size / 1e6:.0f} MB, written in {time.perf_counter() - started:.0f} s; "
            f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
        )
        port, token = free_port(), secrets.token_hex(8)
        server = start_server(home, root, port, token)
        try:
            process = psutil.Process(server.pid)
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
            timed(connection, "/nbtoolkit/api/jobs?limit=1", token)  # the server warm, as a user's would be
            rss_before = process.memory_info().rss / 1e6
            base = f"/nbtoolkit/api/jobs/{job_id}"
            first = timed(connection, f"{base}/metrics?since=0&points=500", token)[1]
            slowest = 0.0
            print(
                f"{'request':46} {'first ms':>9} {'median ms':>10} {'max ms':>8} {'server CPU ms':>14} {'reply KB':>9}"
            )
            for label, path in [
                ("GET /jobs/ID (the detail view)", base),
                ("GET metrics?since=0&points=500 (chart opens)", f"{base}/metrics?since=0&points=500"),
                ("GET metrics?since=next&points=500 (a poll)", f"{base}/metrics?since={first['next']}&points=500"),
            ]:
                samples, reply = [], b""
                cpu_before = sum(process.cpu_times()[:2])
                for _ in range(args.repeat):
                    start = time.perf_counter()
                    connection.request("GET", path, headers={"Authorization": f"token {token}"})
                    reply = connection.getresponse().read()
                    samples.append(time.perf_counter() - start)
                cpu_ms = (sum(process.cpu_times()[:2]) - cpu_before) / args.repeat * 1000
                slowest = max(slowest, *samples)
                print(
                    f"{label:46} {samples[0] * 1000:>9.1f} {statistics.median(samples) * 1000:>10.1f} "
                    f"{max(samples) * 1000:>8.1f} {cpu_ms:>14.1f} {len(reply) / 1000:>9.1f}"
                )
            growth = process.memory_info().rss / 1e6 - rss_before
            print(
                f"records in the chart's first read: {len(first['records'])} (downsampled: {first['downsampled']}); "
                f"server RSS {rss_before:.0f} MB before, growth {growth:+.1f} MB"
            )
            ok = slowest < TARGET_S and growth < TARGET_RSS_MB
            print(
                f"slowest answer {slowest * 1000:.0f} ms (target < {TARGET_S * 1000:.0f} ms), RSS growth "
                f"{growth:+.1f} MB (target < {TARGET_RSS_MB:.0f} MB): {'meets' if ok else 'misses'} the targets; "
                f"load average now {os.getloadavg()[0]:.1f}"
            )
            return 0 if ok else 1
        finally:
            server.terminate()
            server.wait(timeout=20)


if __name__ == "__main__":
    sys.exit(main())
