"""Killed processes: the submitter, the CLI, the supervisor, one rank. The job's promise holds each time."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time

import psutil

from nbtoolkit.api import Job, launch
from nbtoolkit.runner import JobStore
from tests.conftest import PYTHON
from tests.faults.conftest import job_pids
from tests.faults.jobs import PACED, finished_all, paced_launch, printed_steps, submit_paced, wait_for
from tests.test_secrets import SECRET, files_holding

SUBMIT_THEN_WAIT = (
    "import json, sys, time; from nbtoolkit.launching.launch import Launch; "
    "from nbtoolkit.runner import JobStore, submit; "
    "r = submit(Launch.from_dict(json.loads(sys.argv[1])), name='k', task='text-classification', "
    "store=JobStore(sys.argv[2])); print(r.id, flush=True); time.sleep(600)"
)


def test_kill_9_of_the_submitting_kernel(store, observe):
    launch_ = paced_launch(steps=12, pace=0.2)
    kernel = subprocess.Popen(
        [PYTHON, "-c", SUBMIT_THEN_WAIT, launch_.to_json(), str(store.home)], stdout=subprocess.PIPE, text=True
    )
    job = Job(kernel.stdout.readline().strip(), store)
    wait_for(lambda: printed_steps(job))
    kernel.send_signal(signal.SIGKILL)
    kernel.wait()
    assert job.wait(timeout=60) == "succeeded"
    observe(job, "kill -9 of the submitting kernel", finished_all(job, 12), time.monotonic())


def test_kill_9_of_the_cli_following_the_job(store, tmp_path, observe):
    spec = tmp_path / "spec.json"
    spec.write_text(
        json.dumps(
            {"task": "text-classification", "script": {"path": str(PACED), "args": ["--steps", "12", "--pace", "0.2"]}}
        )
    )
    cli = subprocess.Popen(
        [PYTHON, "-m", "nbtoolkit.cli", "run", str(spec), "--follow"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    job = Job(wait_for(lambda: store.list() and store.list()[0].id), store)
    wait_for(lambda: printed_steps(job))
    cli.send_signal(signal.SIGKILL)
    cli.wait()
    assert job.wait(timeout=60) == "succeeded"
    observe(job, "kill -9 of the CLI", finished_all(job, 12), time.monotonic())


def test_kill_9_of_the_supervisor_ends_every_rank_and_the_job_is_lost(store, observe):
    job = submit_paced(store, "--child", steps=1000, pace=0.2)
    wait_for(lambda: "child " in job.logs() and printed_steps(job))
    supervisor = job.record.supervisor_pid
    os.kill(supervisor, signal.SIGKILL)
    killed = time.monotonic()
    assert wait_for(lambda: not job.record.active, timeout=10)
    record = job.record
    # lost is the truth: the supervisor died, the program did not finish and no one recorded an end
    truth = record.status == "lost" and "supervisor process is gone" in record.message and "\ndone\n" not in job.logs()
    observe(job, "kill -9 of the supervisor", truth, killed)


def test_pkill_9_of_the_supervisors_command_line_ends_every_rank_and_the_job_is_lost(store, observe):
    """What a user tries first on a stuck job: `pkill -9 -f` of the supervisor's command line. The watcher has
    a command line of its own, so it outlives that, ends the ranks and records the job."""
    job = submit_paced(store, "--child", steps=1000, pace=0.2)
    wait_for(lambda: "child " in job.logs() and printed_steps(job))
    pattern = f"nbtoolkit.runner.supervisor {job.id}"  # the job's id keeps other jobs on this machine out of it
    matched = [p.pid for p in psutil.process_iter(["cmdline"]) if pattern in " ".join(p.info["cmdline"] or ())]
    assert matched == [job.record.supervisor_pid]  # the watcher does not look like the supervisor
    subprocess.run(["pkill", "-9", "-f", pattern], check=True)
    killed = time.monotonic()
    assert wait_for(lambda: not job.record.active, timeout=10)
    # lost is the truth, and the watcher says it ended the ranks (a reader may record the loss a moment before)
    with contextlib.suppress(AssertionError):
        wait_for(lambda: "remaining processes were ended" in job.record.message, timeout=10)
    record = job.record
    truth = record.status == "lost" and "remaining processes were ended" in record.message
    truth = truth and "\ndone\n" not in job.logs()
    observe(job, "pkill -9 -f of the supervisor's command line", truth, killed)


def test_pkill_9_of_every_process_naming_the_job_leaves_no_rank_running(store, observe, monkeypatch):
    """`pkill -9 -f JOB_ID` ends the supervisor, its watcher and torchrun (its --log_dir holds the id) at once: no
    one is left to end the ranks, so each dies with its parent (PR_SET_PDEATHSIG) instead of running on. No
    watcher scrubbed the token the ranks printed into their logs: `stop` of the lost job does."""
    monkeypatch.setenv("HF_TOKEN", SECRET)
    spec = {"task": "text-classification", "hardware": {"devices": 2}}
    args = ["--steps", "1000", "--pace", "0.5", "--echo-token", "$HF_TOKEN"]
    job = launch({**spec, "script": {"path": str(PACED), "args": args}}, store=store)

    def ranks() -> list[int]:
        """The job's live ranks (a killed one read between its death and its reaping is a zombie: not live)."""
        live = []
        for pid in job_pids(job.id, job.dir):
            with contextlib.suppress(psutil.Error):
                if "RANK" in psutil.Process(pid).environ():
                    live.append(pid)
        return live

    wait_for(lambda: len(ranks()) == 2 and "step 2/1000" in job.logs(), timeout=120)
    subprocess.run(["pkill", "-9", "-f", job.id], check=True)
    killed = time.monotonic()
    with contextlib.suppress(AssertionError):
        wait_for(lambda: not ranks(), timeout=5)
    left = ranks()
    truth = not left and wait_for(lambda: job.record.status == "lost", timeout=10)
    observe(job, "pkill -9 -f of the job's id (supervisor, watcher and torchrun at once)", truth, killed)
    assert not left, f"ranks still running: {left}"
    assert files_holding(SECRET, store.home) and job.stop() and files_holding(SECRET, store.home) == []


def test_kill_9_of_one_rank_of_a_torchrun_job(home, observe):
    store = JobStore(home)
    job = launch(
        {
            "task": "text-classification",
            "hardware": {"devices": 2},
            "train": {"max_steps": 5000, "batch_size": 8, "logging_steps": 2},
        },
        store=store,
    )
    wait_for(lambda: [r for r in job.records() if r.get("kind") == "train"] or not job.record.active, timeout=240)
    assert job.record.active, job.logs(tail=30)

    def rank(number: int) -> list[int]:
        return [
            pid
            for pid in job_pids(job.id, job.dir)
            if psutil.Process(pid).environ().get("RANK") == str(number)
            and "nbtoolkit.train" in " ".join(psutil.Process(pid).cmdline())
        ]

    victim = wait_for(lambda: rank(1))[0]
    os.kill(victim, signal.SIGKILL)
    status = job.wait(timeout=120)
    ended = time.monotonic()
    # failed is the truth: one of its ranks died before the training ended
    truth = status == "failed" and job.record.exit_code not in (0, None) and job.record.step < 5000
    observe(job, "kill -9 of one rank", truth, ended)


def start_server(home, root, port: int, token: str) -> subprocess.Popen:
    """A real Jupyter server with the nbtoolkit extension, answering on `port`."""
    server = subprocess.Popen(
        [
            PYTHON,
            "-m",
            "jupyter_server",
            "--no-browser",
            "--allow-root",
            f"--port={port}",
            "--ServerApp.ip=127.0.0.1",
            "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={token}",
            f"--ServerApp.root_dir={root}",
        ],
        env={**os.environ, "NBTOOLKIT_HOME": str(home), "JUPYTER_RUNTIME_DIR": str(root / "runtime")},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wait_for(lambda: rest(port, token, "GET", "/api/status")[0] == 200, timeout=120, poll=0.3)
    return server


def rest(port: int, token: str, method: str, path: str) -> tuple[int, dict]:
    import http.client

    try:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        connection.request(method, path, headers={"Authorization": f"token {token}"})
        response = connection.getresponse()
        return response.status, json.loads(response.read() or b"{}")
    except (OSError, ValueError):
        return 0, {}


def test_the_server_restarted_mid_run(store, tmp_path, observe):
    from nbtoolkit.launching.launch import free_port

    port, token, root = free_port(), "faults", tmp_path / "root"
    root.mkdir()
    job = submit_paced(store, steps=100000, pace=0.1)
    server = start_server(store.home, root, port, token)
    try:
        assert wait_for(lambda: rest(port, token, "GET", f"/nbtoolkit/api/jobs/{job.id}")[1].get("status") == "running")
        server.send_signal(signal.SIGKILL)
        server.wait()
        server = start_server(store.home, root, port, token)
        assert rest(port, token, "GET", f"/nbtoolkit/api/jobs/{job.id}")[1]["status"] == "running"
        answer, detail = rest(port, token, "POST", f"/nbtoolkit/api/jobs/{job.id}/stop")
        stopped = time.monotonic()
        served = rest(port, token, "GET", f"/nbtoolkit/api/jobs/{job.id}/metrics?since=0")[1]["records"]
    finally:
        server.kill()
        server.wait()
    # the truth: the job ran on through the restart and the new server stopped it, and serves all its metrics
    truth = (
        (answer, detail.get("status")) == (200, "stopped")
        and len(served) == len(job.records()) > 0
        and len(printed_steps(job)) >= len(served)
    )
    observe(job, "the server restarted mid-run", truth, stopped)
