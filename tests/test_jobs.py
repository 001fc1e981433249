"""Jobs end to end: real training through the store, detachment, stop, failures, user scripts."""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from nbtoolkit.api import Job, launch
from nbtoolkit.ranks.heartbeat import read_heartbeats
from tests.conftest import PYTHON, SCRIPTS

TINY = {
    "task": "text-classification",
    "train": {"max_steps": 60, "batch_size": 16, "learning_rate": 0.003, "logging_steps": 10, "eval_on_start": True},
}


def wait_for(condition, timeout=60.0, poll=0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(poll)
    raise AssertionError(f"condition not met within {timeout}s")


def test_real_training_job_end_to_end(store):
    job = launch(TINY, store=store)
    seen = [job.status]
    while job.record.active:
        seen.append(job.status)
        time.sleep(0.05)
    seen.append(job.status)
    statuses = list(dict.fromkeys(seen))
    assert statuses[-1] == "succeeded", job.logs()
    assert "running" in statuses and statuses.index("running") < statuses.index("succeeded")

    record = job.record
    assert record.exit_code == 0 and record.started <= record.ended
    assert record.stages[0]["name"] == "train" and record.stages[0]["status"] == "succeeded"
    assert (record.step, record.total_steps) == (60, 60)

    metrics = job.records()
    train = [m for m in metrics if m["kind"] == "train"]
    evals = [m for m in metrics if m["kind"] == "eval"]
    assert [m["step"] for m in train] == [10, 20, 30, 40, 50, 60]
    assert all(m["samples_per_second"] > 0 and m["tokens_per_second"] > 0 and m["max_steps"] == 60 for m in train)
    assert train[-1]["loss"] < train[0]["loss"]
    assert evals[0]["step"] == 0 and evals[-1]["step"] == 60
    assert evals[-1]["eval_accuracy"] > evals[0]["eval_accuracy"]
    assert [m["kind"] for m in metrics].count("summary") == 1

    log = job.logs()
    assert "[nbtoolkit] step 60/60 (100%)" in log and "job succeeded" in log
    assert (job.dir / "output" / "model" / "config.json").is_file()
    assert (job.dir / "run.sh").stat().st_mode & 0o100


def sleepy_spec(tmp_path):
    return {"task": "text-classification", "script": {"path": str(SCRIPTS / "sleepy.py")}}


def test_job_outlives_the_process_that_submitted_it(store, tmp_path):
    code = (
        "import json, sys; from nbtoolkit.api import launch; from nbtoolkit.runner import JobStore;"
        "print(launch(json.loads(sys.argv[1]), store=JobStore(sys.argv[2])).id)"
    )
    import json

    submitter = subprocess.run(
        [PYTHON, "-c", code, json.dumps(sleepy_spec(tmp_path)), str(store.home)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    job = Job(submitter.stdout.strip(), store)
    wait_for(lambda: "ready pids" in job.logs())
    time.sleep(1.0)
    assert job.status == "running"
    assert psutil.pid_exists(job.record.supervisor_pid)
    # metrics keep arriving from the log while its submitter is long gone
    wait_for(lambda: len([m for m in job.records() if m["kind"] == "train"]) >= 3)
    assert job.stop() == "stopped"


def test_stop_ends_every_process_of_the_job(store, tmp_path):
    job = launch(sleepy_spec(tmp_path), store=store)
    ready = wait_for(lambda: re.search(r"ready pids ([\d ]+)", job.logs()))
    pids = [int(pid) for pid in ready.group(1).split()] + [job.record.supervisor_pid]
    assert all(psutil.pid_exists(pid) for pid in pids)
    started = time.monotonic()
    assert job.stop() == "stopped"

    def all_gone():
        return not [pid for pid in pids if psutil.pid_exists(pid) and psutil.Process(pid).status() != "zombie"]

    wait_for(all_gone, timeout=10)
    assert time.monotonic() - started < 10
    record = job.record
    assert record.message == "stopped on request" and record.ended is not None
    # nothing is lost: the log and the metrics parsed so far stay readable
    assert "ready pids" in job.logs() and job.records()[0]["kind"] == "train"


def test_failing_job_reports_its_one_sentence(store):
    spec = {**TINY, "dataset": {"text_column": "body"}}
    job = launch(spec, store=store)
    assert job.wait(timeout=120) == "failed"
    record = job.record
    assert record.exit_code == 2
    assert record.message == "dataset.text_column 'body' is not a column of the data; its columns are text, label"


def test_a_run_whose_data_gives_no_batch_fails_instead_of_succeeding_untrained(store):
    """The Trainer only warns when its dataloader is empty: the job ran zero steps and called it success."""
    spec = {
        **TINY,
        "train": {"max_steps": 5, "batch_size": 2000, "eval_batch_size": 16},
        "extra": {"dataloader_drop_last": True},
    }  # the bundled sample holds 1,200 training examples
    job = launch(spec, store=store)
    assert job.wait(timeout=120) == "failed"
    assert job.record.message == (
        "no training step ran: 1200 training examples give no full batch of 2000 to each of "
        "1 process(es) (dataloader_drop_last drops a partial one); give more data or lower "
        "train.batch_size"
    )


def test_an_hf_style_script_job_records_its_trainers_metrics(store, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the script runs where it is launched from, and writes its output_dir there
    spec = {
        "task": "text-classification",
        "script": {"path": str(SCRIPTS / "hf_style_train.py"), "args": ["--max_steps", "30", "--logging_steps", "5"]},
    }
    job = launch(spec, store=store)
    assert job.wait(timeout=120) == "succeeded", job.logs()
    metrics = job.records()
    train = [m for m in metrics if m["kind"] == "train"]
    assert len(train) == 6 and all("loss" in m and m["max_steps"] == 30 for m in train)
    assert [m["kind"] for m in metrics].count("eval") == 2 and metrics[-1]["kind"] == "summary"
    assert job.record.total_steps == 30
    (beat,) = read_heartbeats(job.dir)  # autolog's callback beats on every rank, its last step written at exit
    assert (beat["rank"], beat["step"], beat["can_checkpoint"]) == (0, 30, True)


def test_missing_script_is_refused_before_anything_starts(store):
    from nbtoolkit.backends import LaunchError

    with pytest.raises(LaunchError, match="script.path /nope/train.py does not exist"):
        launch({"task": "causal-lm", "script": {"path": "/nope/train.py"}}, store=store)
    assert store.count() == 0


def test_job_metrics_as_a_dataframe(store, tmp_path):
    job = launch({"task": "text-classification", "script": {"path": str(SCRIPTS / "sleepy.py")}}, store=store)
    wait_for(lambda: len(job.records()) >= 3)
    job.stop()
    frame = job.metrics()
    assert list(frame["kind"].unique()) == ["train"] and frame["loss"].iloc[0] == 3.0
    assert len(frame) == len(job.records())


def test_a_late_supervisor_runs_nothing_for_a_job_that_already_ended(store):
    from nbtoolkit.runner import write_launch_files
    from tests.faults.jobs import paced_launch

    record = store.create(name="late", task="text-classification", backend="local")
    write_launch_files(paced_launch(steps=3, pace=0.05), store.job_dir(record.id))
    (store.job_dir(record.id) / "output.log").touch()
    store.update(record.id, status="stopped", ended=time.time(), message="stopped on request")
    late = subprocess.run(
        [PYTHON, "-m", "nbtoolkit.runner.supervisor", record.id],
        capture_output=True,
        timeout=60,
        env={**os.environ, "NBTOOLKIT_HOME": str(store.home)},
    )
    assert late.returncode == 0
    assert store.get(record.id).status == "stopped" and "stage train" not in Job(record.id, store).logs()


def test_a_lost_jobs_surviving_processes_block_resume_and_stop_ends_them(store):
    from nbtoolkit.api import resume
    from nbtoolkit.backends import LaunchError
    from tests.faults.jobs import submit_paced

    job = submit_paced(store, "--child", steps=1000)
    child = int(wait_for(lambda: re.search(r"^child (\d+)$", job.logs(), re.MULTILINE)).group(1))
    record = job.record
    supervisor = psutil.Process(record.supervisor_pid)

    def gone(pid):
        return not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE

    # the supervisor dies and so does its watcher (kill -9 of both): the program ends at its next line (its
    # output pipe has no reader left); its child, silent in its own session, survives
    for process in [child for child in supervisor.children() if child.pid != record.pgid] + [supervisor]:
        process.kill()
    assert wait_for(lambda: job.status == "lost", timeout=10)
    wait_for(lambda: gone(record.pgid), timeout=10)
    assert psutil.pid_exists(child)
    with pytest.raises(LaunchError, match=rf"job {job.id} is lost but 1 of its processes still run"):
        resume(job.id, store=store)
    assert job.stop() == "lost"
    wait_for(lambda: gone(child), timeout=10)


def test_a_stop_the_program_could_not_carry_out_is_not_reported_as_stopped(store):
    from tests.faults.jobs import printed_steps, submit_paced

    job = submit_paced(store, "--refuse-stop", steps=1000)
    wait_for(lambda: printed_steps(job))
    assert job.stop() == "failed"
    assert job.record.message == "the stop did not complete: could not stop the remote run: permission denied"


def test_relative_paths_and_home_are_taken_from_the_callers_directory(tmp_path, monkeypatch):
    """The README's `files: {train: data/train.jsonl}`, a relative script and NBTOOLKIT_HOME, run from a job folder."""
    import shutil

    source = Path(__file__).resolve().parents[1] / "nbtoolkit" / "assets" / "data" / "text-classification"
    (tmp_path / "data").mkdir()
    for split in ("train", "validation"):
        shutil.copy(source / f"{split}.jsonl", tmp_path / "data" / f"{split}.jsonl")
    shutil.copy(SCRIPTS / "paced.py", tmp_path / "paced.py")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("NBTOOLKIT_HOME", "relhome")
    spec = {
        **TINY,
        "train": {**TINY["train"], "max_steps": 10},
        "dataset": {"files": {"train": "data/train.jsonl", "validation": "data/validation.jsonl"}},
    }
    job = launch(spec)
    assert job.wait(timeout=180) == "succeeded", job.logs()
    assert job.spec.dataset.files["train"] == str(tmp_path / "data" / "train.jsonl")
    assert job.dir.is_relative_to(tmp_path / "relhome")
    script = launch({"task": "text-classification", "script": {"path": "paced.py", "args": ["--steps", "2"]}})
    assert script.wait(timeout=120) == "succeeded", script.logs()
    assert script.spec.script.path == str(tmp_path / "paced.py")


def test_a_local_model_folder_and_other_paths_become_absolute_but_hub_ids_stay(tmp_path):
    from nbtoolkit.spec import load_spec
    from nbtoolkit.spec_parts.paths import absolute_paths

    (tmp_path / "models" / "mine").mkdir(parents=True)
    spec = load_spec(
        {
            "task": "text-classification",
            "model": "models/mine",
            "resume": "out/checkpoint-5",
            "dataset": {"files": {"train": "data/t.jsonl", "validation": "s3://bucket/v.jsonl"}},
        }
    )
    resolved = absolute_paths(spec, tmp_path)
    assert resolved.model == str(tmp_path / "models" / "mine") and resolved.resume == str(tmp_path / "out/checkpoint-5")
    assert resolved.dataset.files == {"train": str(tmp_path / "data/t.jsonl"), "validation": "s3://bucket/v.jsonl"}
    assert absolute_paths(spec.model_copy(update={"model": "bert-base-uncased"}), tmp_path).model == "bert-base-uncased"
    assert absolute_paths(spec.model_copy(update={"model": "./later"}), tmp_path).model == str(tmp_path / "later")


def test_log_tails_read_from_the_end_of_a_huge_log(store):
    """A 20 GB log (sparse: no disk used) whose last lines are text: every tail reads only its end."""
    import tracemalloc

    from nbtoolkit.runner.store import LOG_FILE
    from tests.test_cli import nbtoolkit

    record = store.create(name="huge", task="text-classification", backend="local")
    store.update(record.id, status="succeeded")
    with open(store.job_dir(record.id) / LOG_FILE, "wb") as log:
        log.truncate(20 * 1024**3)
        log.seek(0, os.SEEK_END)
        log.write(b"\n" + b"".join(b"line %d\n" % i for i in range(1, 6)) + b"\r 50%|#####     | 5/10")
    job = Job(record.id, store)
    tracemalloc.start()
    started = time.monotonic()
    assert job.logs(tail=3) == "line 4\nline 5\n\r 50%|#####     | 5/10"
    assert tracemalloc.get_traced_memory()[1] < 4 * 1024 * 1024 and time.monotonic() - started < 5
    tracemalloc.stop()
    shown = nbtoolkit("logs", record.id, "-n", "2").stdout  # (text mode reads the bar's \r as a line end)
    assert shown.startswith("line 5\n") and shown.endswith(" 50%|#####     | 5/10\n")


QUIET_SCRIPT = """\
import pathlib, sys, time
print("{'loss': 1.9, 'learning_rate': 0.0001, 'epoch': 0.25}", flush=True)
go, deadline = pathlib.Path(sys.argv[1]), time.time() + 120
while not go.exists() and time.time() < deadline:
    time.sleep(0.2)
"""


def test_a_quiet_scripts_last_train_dict_is_charted_while_it_runs(store, tmp_path):
    """A script's Trainer with bars off prints a dict and nothing after it for a while (a long logging interval):
    its record reaches metrics.jsonl once the log has been quiet for SETTLE_S, not at the next logging step."""
    from nbtoolkit.metrics.parse import SETTLE_S

    script, go = tmp_path / "quiet.py", tmp_path / "go"
    script.write_text(QUIET_SCRIPT)
    job = launch({"task": "causal-lm", "script": {"path": str(script), "args": [str(go)]}}, store=store)
    deadline = time.monotonic() + SETTLE_S + 30
    while not job.records():
        assert job.record.active and time.monotonic() < deadline, job.logs(tail=20)
        time.sleep(0.5)
    assert job.record.active  # charted while the script still waits
    assert [(r["kind"], r["loss"]) for r in job.records()] == [("train", 1.9)]
    go.touch()
    assert job.wait(timeout=60) == "succeeded"
    assert [(r["kind"], r["loss"]) for r in job.records()] == [("train", 1.9)]
