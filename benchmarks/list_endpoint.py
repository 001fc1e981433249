"""Latency of the job list endpoint with 1,000 jobs in the store (target: p95 < 50 ms).

Fills a fresh store with 1,000 jobs (10 running, each job with a 200-record metrics.jsonl),
starts a real Jupyter server with the nbtoolkit extension on a local port, and times
GET /nbtoolkit/api/jobs over one keep-alive connection. Wall-clock latency depends on what
else the machine runs, so the server's own CPU time per request is printed too.

    .venv/bin/python benchmarks/list_endpoint.py [--jobs 1000] [--requests 200]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import secrets
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

from nbtoolkit.metrics.series import METRICS_FILE
from nbtoolkit.runner.store import LOG_FILE, JobStore


def fill_store(home: Path, jobs: int, records: int, running: int) -> None:
    store = JobStore(home)
    me = psutil.Process()
    for index in range(jobs):
        record = store.create(
            name=f"bench-{index}", task="text-classification", backend="torchrun", info={"hourly_price_usd": 4.1}
        )
        directory = store.job_dir(record.id)
        (directory / LOG_FILE).write_text("training\n" * 100)
        with open(directory / METRICS_FILE, "w") as metrics:
            for step in range(1, records + 1):
                metrics.write(
                    json.dumps(
                        {
                            "time": 1e9 + step,
                            "step": step * 10,
                            "epoch": step / records,
                            "kind": "train",
                            "loss": 3.0 / step,
                            "learning_rate": 5e-5,
                            "samples_per_second": 120.5,
                            "tokens_per_second": 15000.0,
                            "window_seconds": 1.3,
                            "max_steps": records * 10,
                        }
                    )
                    + "\n"
                )
        # the newest jobs run (their supervisor: this process, so the liveness check passes)
        active = index >= jobs - running
        store.update(
            record.id,
            status="running" if active else "succeeded",
            started=1e9,
            ended=None if active else 1e9 + 600,
            step=records * 10,
            total_steps=records * 10,
            loss=3.0 / records,
            samples_per_second=120.5,
            supervisor_pid=me.pid if active else None,
            supervisor_started=me.create_time() if active else None,
        )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server(home: Path, root: Path, port: int, token: str, log: Path | None = None) -> subprocess.Popen:
    """A Jupyter server with the nbtoolkit extension on `port`; its output goes to `log` (if given)."""
    env = {**os.environ, "NBTOOLKIT_HOME": str(home), "JUPYTER_RUNTIME_DIR": str(root / "runtime")}
    output = open(log, "wb") if log else subprocess.DEVNULL  # noqa: SIM115 - the server holds it until it ends
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "jupyter_server",
            "--no-browser",
            "--allow-root",
            f"--port={port}",
            "--ServerApp.port_retries=0",
            "--ServerApp.ip=127.0.0.1",
            f"--IdentityProvider.token={token}",
            f"--ServerApp.root_dir={root}",
        ],
        env=env,
        stdout=output,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            connection.request("GET", f"/api/status?token={token}")
            if connection.getresponse().status == 200:
                return process
        except OSError:
            time.sleep(0.2)
    process.kill()
    raise RuntimeError("the Jupyter server did not start")


def timed(connection: http.client.HTTPConnection, path: str, token: str) -> tuple[float, dict]:
    start = time.perf_counter()
    connection.request("GET", path, headers={"Authorization": f"token {token}"})
    response = connection.getresponse()
    body = response.read()
    elapsed = time.perf_counter() - start
    if response.status != 200:
        raise RuntimeError(f"{path}: {response.status} {body[:200]!r}")
    return elapsed, json.loads(body)


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--records", type=int, default=200, help="metrics records per job")
    parser.add_argument("--requests", type=int, default=200)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="nbtoolkit-bench-") as tmp:
        home, root = Path(tmp) / "home", Path(tmp) / "root"
        root.mkdir()
        started = time.perf_counter()
        fill_store(home, args.jobs, args.records, running=10)
        print(
            f"store: {args.jobs} jobs x {args.records} metric records, filled in "
            f"{time.perf_counter() - started:.1f}s; load average {os.getloadavg()[0]:.1f} "
            f"on {os.cpu_count()} cores"
        )
        port, token = free_port(), secrets.token_hex(8)
        server = start_server(home, root, port, token)
        try:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            cpu = psutil.Process(server.pid)
            print(f"{'request':44} {'jobs':>5} {'first ms':>9} {'p50 ms':>8} {'p95 ms':>8} {'server CPU ms':>14}")
            for label, path, count in [
                ("GET jobs (the panel's page: newest 100)", "/nbtoolkit/api/jobs", args.requests),
                ("GET jobs?status=running", "/nbtoolkit/api/jobs?status=running", args.requests),
                ("GET jobs?limit=1000 (the whole store)", "/nbtoolkit/api/jobs?limit=1000", args.requests // 4),
            ]:
                first, body = timed(connection, path, token)
                before = sum(cpu.cpu_times()[:2])
                samples = [timed(connection, path, token)[0] for _ in range(count)]
                cpu_ms = (sum(cpu.cpu_times()[:2]) - before) / count * 1000
                print(
                    f"{label:44} {len(body['jobs']):>5} {first * 1000:>9.1f} "
                    f"{statistics.median(samples) * 1000:>8.1f} {percentile(samples, 0.95) * 1000:>8.1f} "
                    f"{cpu_ms:>14.1f}"
                )
            p95 = percentile([timed(connection, "/nbtoolkit/api/jobs", token)[0] for _ in range(args.requests)], 0.95)
            verdict = "meets" if p95 < 0.050 else "misses"
            print(
                f"list endpoint p95 {p95 * 1000:.1f} ms with {args.jobs} jobs in the store: {verdict} the 50 ms target"
                f" (ratio to target {p95 / 0.050:.2f}; load average now {os.getloadavg()[0]:.1f})"
            )
            return 0 if p95 < 0.050 else 1
        finally:
            server.terminate()
            server.wait(timeout=20)


if __name__ == "__main__":
    sys.exit(main())
