"""Real Slurm jobs of the bundled tiny model on the session's one-node cluster: 2 ranks under srun, followed into
the job list, metrics and chart; stopped with `nbtoolkit stop` (scancel), leaving no process behind."""

from __future__ import annotations

import re
import subprocess
import threading

import psutil
import pytest
import yaml

from nbtoolkit.api import Job, launch
from nbtoolkit.backends import dispatch
from nbtoolkit.lineage.checkpoints import last_checkpoint
from nbtoolkit.metrics.series import read_metrics
from nbtoolkit.runner.tree import tagged_processes
from nbtoolkit.spec import load_spec
from tests.conftest import SCRIPTS
from tests.faults.conftest import ORPHAN_DEADLINE_S
from tests.slurm.cluster import PARTITION, free_port
from tests.test_adapters import STANDING_STILL, assert_same_weights, saved_weights
from tests.test_cli import nbtoolkit
from tests.test_jobs import wait_for

pytestmark = pytest.mark.heavy  # minutes of real training: run first under pytest -n (tests/conftest.py)

SPEC = {"task": "text-classification", "hardware": {"target": "slurm", "accelerator": "cpu", "devices": 2, "nodes": 1}}


def slurm(*argv: str) -> str:
    return subprocess.run(list(argv), capture_output=True, text=True, check=True).stdout


def slurm_processes(slurm_job_id: str) -> list[psutil.Process]:
    """slurmstepd of the job (`slurmstepd: [ID.batch]`, `[ID.0]`), by its command line."""
    found = []
    for process in psutil.process_iter(["cmdline"]):
        cmdline = " ".join(process.info["cmdline"] or [])
        if cmdline.startswith("slurmstepd") and f"[{slurm_job_id}." in cmdline:
            found.append(process)
    return found


def test_the_rendered_batch_script_passes_slurms_own_check(slurm_cluster, tmp_path):
    spec = load_spec({**SPEC, "slurm": {"partition": PARTITION, "time_limit": "00:10:00"}})
    (tmp_path / "sbatch.sh").write_text(dispatch.render(spec).files["sbatch.sh"])
    checked = subprocess.run(["sbatch", "--test-only", "sbatch.sh"], cwd=tmp_path, capture_output=True, text=True)
    assert checked.returncode == 0 and "to start at" in checked.stderr, checked.stderr


def test_a_slurm_job_runs_two_ranks_and_is_listed_and_charted(slurm_cluster, tmp_path, home, store):
    spec_path = tmp_path / "spec.yaml"
    spec_path.write_text(yaml.safe_dump({**SPEC, "train": {"max_steps": 6, "logging_steps": 2}}))
    ran = nbtoolkit("run", "--follow", str(spec_path), check=False)
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-2000:]
    record = store.list()[0]
    assert (record.status, record.backend) == ("succeeded", "slurm")
    job_dir = store.job_dir(record.id)
    slurm_id = (job_dir / "slurm_job_id").read_text().strip()
    assert record.info["slurm_job_id"] == slurm_id and record.info["slurm_state"] == "COMPLETED"
    log = (job_dir / "output.log").read_text()
    assert f"submitted sbatch.sh as Slurm job {slurm_id}" in log and f"job {slurm_id} COMPLETED" in log
    assert "2 process(es)" in log and "[rank0]:" in log and "[rank1]:" in log, "two ranks under srun"
    slurm_output = (job_dir / f"slurm-{slurm_id}.out").read_text().splitlines()
    assert [line for line in log.splitlines() if line in slurm_output] == slurm_output, "its lines, whole, in order"
    # metrics.jsonl, written by rank 0 in the job folder, feeds the list, the panel and the chart as usual
    assert [r["step"] for r in read_metrics(job_dir) if r["kind"] == "train"] == [2, 4, 6]
    listed = nbtoolkit("jobs").stdout
    assert any(
        line.startswith(record.id) and " slurm " in line and "succeeded" in line and "6/6" in line
        for line in listed.splitlines()
    ), listed
    from nbtoolkit.server.service import JobsService

    summary = JobsService(store).list().jobs[0]
    assert (summary.id, summary.backend, summary.step) == (record.id, "slurm", 6)
    from nbtoolkit.notebook.charts import live_chart

    chart = live_chart(Job(record.id, store), show=False)
    assert chart.wait(timeout=60) and chart.error is None and chart.png.startswith(b"\x89PNG")
    assert slurm("squeue", "-h", "-j", slurm_id).strip() == ""

    # a Slurm job started from this one's model (`model: job:ID`) reads its folder on the cluster
    chained = launch({**SPEC, "model": f"job:{record.id}", "train": STANDING_STILL}, store=store)
    assert chained.wait(timeout=300) == "succeeded", chained.logs(tail=30)
    assert chained.spec.model == str(job_dir / "output" / "model") and chained.record.info["model_from"] == record.id
    assert_same_weights(saved_weights(chained.model()), saved_weights(job_dir / "output" / "model"))


def test_stop_cancels_the_slurm_job_and_leaves_no_process(slurm_cluster, store):
    job = launch({**SPEC, "train": {"max_steps": 100000, "logging_steps": 5}}, store=store)
    wait_for(lambda: (job.record.step or 0) >= 5, timeout=120, poll=0.5)
    slurm_id = (job.dir / "slurm_job_id").read_text().strip()
    assert slurm("squeue", "-h", "-j", slurm_id, "-o", "%T").strip() == "RUNNING"
    assert tagged_processes(job.id, store.home), "the ranks under slurmstepd carry the job's tag"
    assert slurm_processes(slurm_id), "its slurmstepd are found by their command line"
    # the run doctor's stacks: py-spy on both ranks under slurmstepd (this host is the cluster's node)
    stacks = job.stacks()
    assert sorted(stack.rank for stack in stacks.ranks) == [0, 1] and not stacks.elsewhere, stacks
    assert all(any(frame[1].endswith("train/program.py") for frame in stack.frames) for stack in stacks.ranks), stacks
    stopped = nbtoolkit("stop", job.id)
    assert f"job {job.id} stopped" in stopped.stdout
    record = job.record
    assert (record.status, record.message) == ("stopped", "stopped on request")
    assert slurm("squeue", "-h", "-j", slurm_id).strip() == ""
    assert "CANCELLED" in slurm("scontrol", "show", "job", "-o", slurm_id)
    assert tagged_processes(job.id, store.home) == [], "no torchrun or python of the job is left"
    assert slurm_processes(slurm_id) == [], "no slurmstepd of the job is left"
    log = (job.dir / "output.log").read_text()
    assert f"stopping: scancel {slurm_id}" in log and f"job {slurm_id} CANCELLED" in log
    assert [r for r in read_metrics(job.dir) if r["kind"] == "train"], "the stopped job's metrics stay readable"


def test_a_requeued_job_resumes_from_its_last_checkpoint(slurm_cluster, store):
    """`scontrol requeue` mid-run stands in for a preemption: Slurm ends the running job and starts the same
    job id again, whose program resumes from the last complete checkpoint in output/; the job succeeds."""
    job = launch({**SPEC, "train": {"max_steps": 300, "logging_steps": 10, "save_steps": 50}}, store=store)
    wait_for(lambda: last_checkpoint(job.dir / "output"), timeout=120, poll=0.2)
    slurm_id = (job.dir / "slurm_job_id").read_text().strip()
    slurm("scontrol", "requeue", slurm_id)
    # Slurm holds a requeued job back for a while (BeginTime); release it now rather than wait
    wait_for(lambda: "PENDING" in slurm("squeue", "-h", "-j", slurm_id, "-o", "%T"), timeout=60, poll=0.2)
    slurm("scontrol", "update", f"JobId={slurm_id}", "StartTime=now")
    assert job.wait(timeout=180) == "succeeded", job.record.message
    log = (job.dir / "output.log").read_text()
    assert "DUE TO JOB REQUEUE" in log and "restart 1" in log
    resumed = re.search(r"resuming from output/checkpoint-(\d+)", log)
    assert resumed, log[-3000:]
    first = int(resumed.group(1)) + 10  # the first step the second run logs
    steps = [r["step"] for r in read_metrics(job.dir) if r["kind"] == "train"]
    second = steps[len(steps) - 1 - steps[::-1].index(first) :]
    assert second == list(range(first, 301, 10)), "the second run counts on from the checkpoint"


def script_spec(path) -> dict:
    return {**SPEC, "task": "causal-lm", "hardware": {**SPEC["hardware"], "devices": 1}, "script": {"path": str(path)}}


def test_a_failed_slurm_job_fails_with_its_programs_own_error(slurm_cluster, store, tmp_path):
    script = tmp_path / "broken.py"
    script.write_text("raise ValueError('column text is missing from the training file')\n")
    job = launch(script_spec(script), store=store)
    assert job.wait(timeout=120) == "failed"
    assert job.record.message == "exited with code 1: ValueError: column text is missing from the training file"
    assert "ended FAILED: a task exited with an error, exit code 1:0" in (job.dir / "output.log").read_text()


def test_a_job_cancelled_outside_nbtoolkit_is_recorded_as_stopped(slurm_cluster, store):
    job = launch(script_spec(SCRIPTS / "sleepy.py"), store=store)
    wait_for(lambda: "ready pids" in (job.dir / "output.log").read_text(), timeout=120, poll=0.2)
    slurm_id = (job.dir / "slurm_job_id").read_text().strip()
    slurm("scancel", slurm_id)
    assert job.wait(timeout=120) == "stopped"
    assert f"Slurm job {slurm_id} was cancelled outside nbtoolkit (scancel)" in (job.dir / "output.log").read_text()
    # the promise for a job that ended without nbtoolkit's stop (which waits for them): its processes are gone
    # within ORPHAN_DEADLINE_S (Slurm kills the steps after KillWait=5 s; the follower exits after recording)
    wait_for(
        lambda: tagged_processes(job.id, store.home) == [] and slurm_processes(slurm_id) == [],
        timeout=ORPHAN_DEADLINE_S,
        poll=0.2,
    )


def test_a_controller_that_does_not_answer_is_asked_again_then_named(slurm_cluster, tmp_path, monkeypatch, capsys):
    """scontrol without an answer is not a job Slurm forgot: the follower asks again, and only after
    LOST_CONTACT_S says so (the job may still run), instead of calling the job ended."""
    from nbtoolkit.backends.slurm import follow

    conf = slurm_cluster.conf.read_text().replace("SlurmctldPort=", f"SlurmctldPort={free_port()}\n# was ")
    conf += "MessageTimeout=1\n"  # scontrol's own retries, shortened
    (tmp_path / "slurm.conf").write_text(conf)
    monkeypatch.setenv("SLURM_CONF", str(tmp_path / "slurm.conf"))
    monkeypatch.setattr(follow, "LOST_CONTACT_S", 1.0)
    follower = follow.Follower("42", stop_requested=threading.Event(), poll_s=0.1)
    assert follower.run() == 1
    said = capsys.readouterr()
    assert "Slurm did not answer, asking again: slurm_load_jobs error: Unable to contact slurm controller" in said.out
    assert (
        "Slurm did not answer about job 42 for 1 s (slurm_load_jobs error: Unable to contact slurm controller "
        "(connect failure)); it may still be running: `scancel 42` ends it"
    ) in said.err


def test_a_job_sbatch_refuses_fails_with_sbatchs_reason(slurm_cluster, store):
    job = launch({**SPEC, "slurm": {"partition": "no-such-partition"}}, store=store)
    assert job.wait(timeout=60) == "failed"
    assert job.record.message == (
        "sbatch did not submit sbatch.sh: sbatch: error: Batch job submission failed: Invalid partition name specified"
    )
