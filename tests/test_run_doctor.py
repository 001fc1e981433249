"""The run doctor with real processes: a hang in a 2-rank torchrun job is caught and explained by the ranks'
stacks, a straggler is named, a running Trainer job saves a checkpoint on request and goes on, and a fork
from it trains on from that step at a new learning rate. The health rules themselves on hand-made heartbeats."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import redirect_stdout
from pathlib import Path

import psutil
import pytest

from nbtoolkit import cli
from nbtoolkit.api import Job, launch
from nbtoolkit.backends import LaunchError
from nbtoolkit.lineage.checkpoints import checkpoint_step, is_complete
from nbtoolkit.lineage.fork import fork_settings, fork_spec
from nbtoolkit.notebook.job_view import health_html
from nbtoolkit.ranks.heartbeat import (
    KEPT_DIR,
    RANKS_DIR,
    REQUEST_FILE,
    CheckpointRequests,
    checkpoint_request,
    read_heartbeats,
    request_checkpoint,
)
from nbtoolkit.runner.checkpoint_request import checkpoint_now
from nbtoolkit.runner.health import DoctorError, assess, parse_stall_floor, process_alive, stall_floor
from nbtoolkit.runner.stacks import RankStack, StacksReport, dump, rank_processes, rank_range, take_stacks
from nbtoolkit.runner.store import this_host
from nbtoolkit.runner.tree import HOME_ENV, JOB_ID_ENV, tagged_processes
from nbtoolkit.server.run_doctor import DoctorService
from nbtoolkit.spec import SpecError, load_spec, parse_settings
from tests.conftest import SCRIPTS, TESTS

TIMEOUT = 180
#: the stall rule's floor for these tests (60 s in real runs): a hang is caught within seconds
FLOOR_S = 3.0
OUTPUT = TESTS.parent / "test-output" / "run-doctor"


def beat(rank: int, step: int, ago: float, step_time: float | None, now: float = 1000.0) -> dict:
    return {"rank": rank, "step": step, "time": now - ago, "step_time": step_time, "host": "h", "pid": 10 + rank}


def test_health_rules_on_heartbeats():
    alive = {0: True, 1: True, 2: True}
    ok = assess([beat(0, 50, 0.1, 0.2), beat(1, 50, 0.2, 0.21)], 1000.0, alive, floor_s=60)
    assert ok.state == "ok" and ok.stall_after_s == 60
    # a straggler: 0.5 s a step against the others' 0.2 s
    slow = assess([beat(0, 50, 0.1, 0.2), beat(1, 40, 0.3, 0.5), beat(2, 50, 0.1, 0.2)], 1000.0, alive, floor_s=60)
    assert slow.state == "slow" and [r.slow for r in slow.ranks] == [False, True, False]
    assert "rank 1" in slow.reason and "2.5x" in slow.reason
    # millisecond steps: 3 ms against 1 ms is jitter, not a straggler
    assert assess([beat(0, 9, 0, 0.001), beat(1, 9, 0, 0.003)], 1000.0, alive, floor_s=60).state == "ok"
    # stalled: no step for 70 s > max(60 s, 10 x 2 s); with 10 s steps the limit is 100 s
    stalled = assess([beat(0, 7, 70, 2.0), beat(1, 6, 75, 2.0)], 1000.0, alive, floor_s=60)
    assert stalled.state == "stalled" and "70 s (limit 60 s)" in stalled.reason
    assert stalled.reason.index("rank 1 at step 6") < stalled.reason.index("rank 0 at step 7")  # the laggard first
    assert assess([beat(0, 7, 70, 10.0), beat(1, 6, 75, 10.0)], 1000.0, alive, floor_s=60).state == "ok"
    # every process gone, or the job over: not a stall
    assert assess([beat(0, 7, 70, 2.0)], 1000.0, {0: False}, floor_s=60).state == "unknown"
    assert assess([beat(0, 7, 70, 2.0)], 1000.0, alive, active=False, floor_s=60).state == "unknown"
    assert assess([], 1000.0, {}, floor_s=60).state == "unknown"


def test_the_notebook_table_marks_the_straggler():
    slow = assess([beat(0, 50, 0.1, 0.2), beat(1, 40, 0.3, 0.5)], 1000.0, {0: True, 1: False}, floor_s=60)
    page = health_html(slow.to_dict())
    assert page.startswith("<p><b style='color: #ef6c00'>slow</b>: rank 1 straggles")
    rows = page.split("<tr")[2:]
    assert rows[0].startswith("><td>0</td><td>50</td><td>0.1 s</td><td>0.2 s</td>")
    assert rows[1].startswith(" style='color: #ef6c00; font-weight: bold'><td>1</td><td>40</td>")
    assert "<td>slow</td>" in rows[1]


def test_stacks_are_grouped_by_identical_stacks():
    reduce = [("all_reduce", "torch/distributed/distributed_c10d.py", 3252), ("step", "train.py", 40)]
    waiting = [("wait_for_data", "train.py", 12), ("step", "train.py", 38)]
    stacks = [RankStack(rank, 100 + rank, reduce) for rank in (0, 1, 2, 3, 4, 5, 6)] + [RankStack(7, 107, waiting)]
    report = StacksReport("abcd1234", 0.0, stacks, [])
    assert report.summary() == (
        "rank 7 in wait_for_data (train.py:12); ranks 0-6 in all_reduce (torch/distributed/distributed_c10d.py:3252)"
    )
    assert rank_range([0, 1, 2, 5, 7, 8]) == "ranks 0-2, 5, 7-8"


def test_a_fifo_a_symlink_and_a_rank_written_twice_among_the_heartbeats(tmp_path):
    ranks = tmp_path / RANKS_DIR
    ranks.mkdir()
    (ranks / "rank-0.json").write_text(json.dumps(beat(0, 5, 0, 0.1)))
    (ranks / "rank-9.json").write_text(json.dumps(beat(0, 2, 0, 0.1)))  # rank 0 again, older
    os.utime(ranks / "rank-9.json", (1, 1))
    os.mkfifo(ranks / "rank-1.json")
    (ranks / "rank-2.json").symlink_to(ranks / "rank-0.json")
    found: list = []
    reader = threading.Thread(target=lambda: found.append(read_heartbeats(tmp_path)), daemon=True)
    reader.start()
    reader.join(5)
    if reader.is_alive():  # blocked on the FIFO: let it go before failing
        os.close(os.open(ranks / "rank-1.json", os.O_WRONLY | os.O_NONBLOCK))
    assert [(b["rank"], b["step"]) for b in found[0]] == [(0, 5)]


def test_heartbeat_fields_of_the_wrong_type_read_as_none(tmp_path):
    (tmp_path / RANKS_DIR).mkdir()
    bad = [{"step": "x"}, {"step_time": "slow"}, {"pid": -5}, {"pid": 1, "started": "x"}, {"time": "y", "step": True}]
    for rank, fields in enumerate(bad):
        beat_ = {**beat(rank, 5, 1.0, 0.1, now=time.time()), "host": this_host(), **fields}
        (tmp_path / RANKS_DIR / f"rank-{rank}.json").write_text(json.dumps(beat_))
    beats = read_heartbeats(tmp_path)
    assert [(b["step"], b["step_time"], b["pid"]) for b in beats[:3]] == [
        (None, 0.1, 10),
        (5, None, 11),
        (5, 0.1, None),
    ]
    assert beats[3]["started"] is None and beats[4]["time"] is None and beats[4]["step"] is None
    alive = {b["rank"]: process_alive(b) for b in beats}
    health = assess(beats, time.time(), alive, floor_s=60)
    assert health.state == "ok" and json.loads(json.dumps(health.to_dict()))["ranks"][0]["step"] is None


def test_a_rank_whose_clock_runs_ahead_does_not_hide_a_hang(tmp_path):
    (tmp_path / RANKS_DIR).mkdir()
    now = time.time()
    for rank, ahead in [(0, 0.0), (1, 120.0)]:  # rank 1's node: its clock 2 min ahead; both stopped at step 4
        path = tmp_path / RANKS_DIR / f"rank-{rank}.json"
        path.write_text(json.dumps({**beat(rank, 4, 10.5, 0.5, now=now + ahead), "written": now + ahead - 10}))
        os.utime(path, (now - 10, now - 10))  # written 10 s ago by this host's clock
    beats = read_heartbeats(tmp_path)
    health = assess(beats, now, {0: True, 1: None}, floor_s=3)
    assert health.state == "stalled" and [r.last_step_ago for r in health.ranks] == [10.5, 10.5]
    # an old heartbeat without `written`, stamped in the future: its step is no later than its file
    path = tmp_path / RANKS_DIR / "rank-1.json"
    path.write_text(json.dumps(beat(1, 4, 0, 0.5, now=now + 1e300)))
    os.utime(path, (now - 10, now - 10))
    assert [r.last_step_ago for r in assess(read_heartbeats(tmp_path), now, {}, floor_s=3).ranks] == [10.5, 10.0]


def test_show_json_is_strict_json_whatever_the_heartbeats_hold(store, monkeypatch):
    job = store.create(name="odd", task="text-classification", backend="local")
    store.update(job.id, status="running", host="elsewhere")
    monkeypatch.setenv("NBTOOLKIT_STALL_FLOOR_S", "nan")
    (store.job_dir(job.id) / RANKS_DIR).mkdir()
    for rank, text in enumerate(['"time": 1e400', '"time": NaN', '"time": -1e400, "step_time": Infinity']):
        (store.job_dir(job.id) / RANKS_DIR / f"rank-{rank}.json").write_text(f'{{"rank": {rank}, "step": 3, {text}}}')
    out = io.StringIO()
    with redirect_stdout(out):
        assert cli.main(["show", job.id, "--json"]) == 0
    health = json.loads(out.getvalue(), parse_constant=lambda name: pytest.fail(f"{name} in show --json"))["health"]
    assert health["stall_after_s"] == 60 and [r["last_step_ago"] for r in health["ranks"]] == [None, None, None]


@pytest.mark.parametrize("value", ["-1", "0", "abc", "nan", "inf"])
def test_a_stall_floor_that_is_no_positive_number_is_60_s_with_one_warning(value, monkeypatch, capsys):
    monkeypatch.setenv("NBTOOLKIT_STALL_FLOOR_S", value)
    parse_stall_floor.cache_clear()  # another test may have read the same value (it warns once a process)
    assert stall_floor() == stall_floor() == 60.0
    (line,) = capsys.readouterr().err.splitlines()
    assert f"NBTOOLKIT_STALL_FLOOR_S='{value}' is not a number of seconds above 0" in line
    monkeypatch.setenv("NBTOOLKIT_STALL_FLOOR_S", "2.5")
    assert stall_floor() == 2.5


def test_a_single_process_job_with_python_children_is_rank_0(store):
    record = store.create(name="pool", task="causal-lm", backend="local")
    env = {**os.environ, JOB_ID_ENV: record.id, HOME_ENV: str(store.home)}
    child = "import time; time.sleep(60)"
    parent = f"import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', {child!r}]); time.sleep(60)"
    job = subprocess.Popen([sys.executable, "-c", parent], env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + 20
        while len(tagged_processes(record.id, store.home)) < 2:  # the parent and its worker
            assert time.monotonic() < deadline, "the worker did not start"
            time.sleep(0.1)
        assert rank_processes(record, store) == {0: job.pid}
        # its heartbeat names another host (NBTOOLKIT_HOST): still dumped here, and not said to run there
        (store.job_dir(record.id) / RANKS_DIR).mkdir()
        (store.job_dir(record.id) / RANKS_DIR / "rank-0.json").write_text(json.dumps({"rank": 0, "host": "login2"}))
        store.update(record.id, status="running")
        report = take_stacks(store, store.get(record.id))
        assert [(s.rank, s.pid, s.error) for s in report.ranks] == [(0, job.pid, None)] and report.elsewhere == []
    finally:
        os.killpg(job.pid, signal.SIGKILL)
        job.wait()


def test_a_ranks_children_that_inherit_its_rank_are_not_taken_for_it(store):
    """A DataLoader worker (Python) and a compiler (gcc; here `sleep`) inherit RANK: the rank is the topmost
    Python process of that rank, or the one its heartbeat names."""
    record = store.create(name="workers", task="causal-lm", backend="local")
    env = {**os.environ, JOB_ID_ENV: record.id, HOME_ENV: str(store.home), "RANK": "0"}
    worker = "import time; time.sleep(60)"
    rank = (
        "import subprocess, sys, time; "
        f"w = subprocess.Popen([sys.executable, '-c', {worker!r}]); subprocess.Popen(['sleep', '60']); "
        "print(w.pid, flush=True); time.sleep(60)"
    )
    job = subprocess.Popen([sys.executable, "-c", rank], env=env, stdout=subprocess.PIPE, start_new_session=True)
    try:
        worker_pid = int(job.stdout.readline())
        deadline = time.monotonic() + 20
        while len(tagged_processes(record.id, store.home)) < 3:
            assert time.monotonic() < deadline, "the children did not start"
            time.sleep(0.1)
        assert rank_processes(record, store) == {0: job.pid}
        assert rank_processes(record, store, [{"rank": 0, "pid": worker_pid}]) == {0: worker_pid}
    finally:
        os.killpg(job.pid, signal.SIGKILL)
        job.wait()


def test_a_stopped_rank_says_why_it_has_no_stack():
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        time.sleep(0.5)
        process.send_signal(signal.SIGSTOP)
        deadline = time.monotonic() + 10  # the signal is delivered asynchronously: a loaded machine saw it late
        while psutil.Process(process.pid).status() != psutil.STATUS_STOPPED:
            assert time.monotonic() < deadline, "the process did not stop"
            time.sleep(0.05)
        with pytest.raises(DoctorError) as raised:
            dump(process.pid)
        said = str(raised.value)
        assert (
            said.startswith(f"its process is stopped (`kill -CONT {process.pid}` resumes it): ") and "main" not in said
        )
    finally:
        process.kill()
        process.wait()


@pytest.mark.parametrize("timeout", [-1.0, 0.0, float("nan"), float("inf")])
def test_checkpoint_with_a_timeout_that_is_no_positive_number_is_refused_unasked(timeout, store):
    record = store.create(name="t", task="text-classification", backend="local")
    store.update(record.id, status="running")
    (store.job_dir(record.id) / RANKS_DIR).mkdir()
    (store.job_dir(record.id) / RANKS_DIR / "rank-0.json").write_text(json.dumps({"rank": 0, "can_checkpoint": True}))
    with pytest.raises(DoctorError, match=r"^timeout \S+ is not a number of seconds above 0 \(default 300\)$"):
        checkpoint_now(store, store.get(record.id), timeout=timeout)
    assert not (store.job_dir(record.id) / REQUEST_FILE).exists()


@pytest.mark.parametrize(("field", "default"), [("on_stall", "dump"), ("on_anomaly", "warn")])
def test_a_null_answer_is_the_default(field, default):
    assert getattr(load_spec({"task": "text-classification", "train": {field: None}}).train, field) == default


def fake_checkpoint(output, step: int):
    folder = output / f"checkpoint-{step}"
    folder.mkdir(parents=True)
    (folder / "trainer_state.json").write_text(json.dumps({"global_step": step}))
    (folder / "model.safetensors").write_bytes(b"weights")
    return folder


def test_a_checkpoint_saved_on_request_outlives_the_rotation(tmp_path, monkeypatch):
    monkeypatch.delenv("RANK", raising=False)
    request_checkpoint(tmp_path)
    requests = CheckpointRequests(tmp_path)
    assert requests.due(5)
    requests.saved(fake_checkpoint(tmp_path / "output", 5))
    shutil.rmtree(tmp_path / "output" / "checkpoint-5")  # save_total_limit's rotation at a later save
    saved = Path(checkpoint_request(tmp_path)["saved"])
    assert saved == tmp_path / "output" / KEPT_DIR / "checkpoint-5" and is_complete(saved)
    assert saved.parent.stat().st_mode & 0o777 == 0o700  # private, as the job folder, whatever the umask


def test_a_fork_keeps_its_checkpoint_before_it_launches(tmp_path):
    output = tmp_path / "output"
    fake_checkpoint(output, 5)
    spec, start, _ = fork_spec("abcd1234", load_spec({"task": "text-classification"}), output, "5", {})
    shutil.rmtree(output / "checkpoint-5")  # the parent runs on and rotates it away
    assert start == Path(spec.resume) == output / KEPT_DIR / "checkpoint-5" and is_complete(start)
    assert fork_spec("abcd1234", spec, output, None, {})[1] == start  # the last checkpoint, kept or not


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ("task=causal-lm", "--set task: a fork trains on the parent's checkpoint, so it keeps its task"),
        ("model=gpt2-does-not-exist", "--set model: a fork trains on the parent's checkpoint, so it keeps its model"),
        ("adapter.r=16", "--set adapter.r: a fork trains on the parent's checkpoint, so it keeps its adapter"),
        ("max_steps=5", "train.max_steps 5 is not above the checkpoint's step 5: the fork would train nothing"),
    ],
)
def test_a_fork_refuses_changes_it_cannot_train_on_before_it_launches(change, said, tmp_path):
    fake_checkpoint(tmp_path / "output", 5)
    with pytest.raises(SpecError) as refused:
        fork_spec(
            "abcd1234", load_spec({"task": "text-classification"}), tmp_path / "output", "5", parse_settings([change])
        )
    assert str(refused.value).startswith(said)
    assert not (tmp_path / "output" / KEPT_DIR).exists()  # refused before anything was kept


def test_a_fork_records_its_changes_as_the_spec_reads_them(tmp_path):
    fake_checkpoint(tmp_path / "output", 5)
    changes = parse_settings(["train.learning_rate=5e-4", "max_steps=76"])  # YAML 1.1 reads 5e-4 as text
    spec, _, paths = fork_spec(
        "abcd1234", load_spec({"task": "text-classification"}), tmp_path / "output", "5", changes
    )
    assert paths == {"train.learning_rate": 0.0005, "train.max_steps": 76} and spec.train.learning_rate == 0.0005
    named, _, _ = fork_spec(
        "abcd1234", load_spec({"task": "text-classification"}), tmp_path / "output", "5", fork_settings(["name=lower"])
    )
    assert named.name == "lower"  # as the docs list it among what a fork may change
    assert parse_settings(["extra.save_strategy=no"]) == {"extra.save_strategy": "no"}  # YAML 1.2: no is text
    with pytest.raises(SpecError, match=r"""^--set name: '\[' is not a YAML value; .* e.g. --set "name='\['"$"""):
        parse_settings(["name=["])
    for empty_part in ("train.=1", ".=1", "train..x=1"):
        with pytest.raises(SpecError, match="is not FIELD=VALUE"):
            parse_settings([empty_part])


def test_a_fork_with_a_batch_that_will_not_fit_is_refused_unless_forced(store):
    """The planner's check of `launch`, made for a new batch size (other changes keep the parent's fit)."""
    record = store.create(name="gpu", task="causal-lm", backend="skypilot")
    spec = {"task": "causal-lm", "model": "gpt2", "hardware": {"target": "skypilot", "instance_type": "g5.xlarge"}}
    (store.job_dir(record.id) / "spec.json").write_text(json.dumps(load_spec(spec).to_dict()))
    fake_checkpoint(store.job_dir(record.id) / "output", 5)
    for change in ({"batch_size": 512}, {"train": {"batch_size": 512}}, {"dataset.max_length": 65536}):
        with pytest.raises(LaunchError, match=r"^predicted .* GiB per device for gpt2 .* exceeds the 22.5 GiB of one"):
            Job(record.id, store).fork(**change)
    assert [job.id for job in store.list()] == [record.id]  # refused before anything started
    with pytest.raises(SpecError, match=r"^--set force: no train or spec field is called force; a fork may change "):
        fork_settings(["force=true"])
    assert fork_settings(["learning_rate=1.0e-4", "dataset.max_length=64", "name=lower-rate"]) == {
        "train.learning_rate": 1e-4,
        "dataset.max_length": 64,
        "name": "lower-rate",
    }


def ranks_spec(*args: str, **train) -> dict:
    return {
        "task": "causal-lm",
        "script": {"path": str(SCRIPTS / "ranks.py"), "args": list(args)},
        "hardware": {"devices": 2},
        "train": train,
    }


def wait_for(condition, job, what: str, timeout: float = TIMEOUT):
    deadline = time.monotonic() + timeout
    while not (found := condition()):
        assert time.monotonic() < deadline and job.record.active, f"no {what}: {job.logs(tail=30)}"
        time.sleep(0.25)
    return found


def test_a_rank_blocked_before_a_collective_is_stalled_and_its_stacks_say_where(store, monkeypatch):
    monkeypatch.setenv("NBTOOLKIT_STALL_FLOOR_S", str(FLOOR_S))  # the supervisor inherits it
    job = launch(
        ranks_spec("--steps", "500", "--collective", "--block-rank", "1", "--block-at", "20", on_stall="stop"),
        store=store,
    )
    assert job.wait(timeout=TIMEOUT) == "stopped", job.logs(tail=30)
    beats = job.health()["ranks"]
    assert [(r["rank"], r["step"]) for r in beats] == [(0, 19), (1, 19)]  # the last step before the hang, exact
    stalled_at = store.get(job.id).info["health"]["time"]
    last_step = max(json.loads(path.read_text())["time"] for path in (job.dir / "ranks").glob("rank-*.json"))
    assert FLOOR_S < stalled_at - last_step < FLOOR_S + 4  # within the rule's time (+ the 2 s check interval)
    assert job.record.message.startswith("stalled (no rank has finished a step for")
    assert "train.on_stall: stop" in job.record.message
    (report,) = (job.dir / "stacks").glob("stacks-*.txt")
    text = report.read_text()
    summary = text.splitlines()[1]
    assert summary.startswith("rank 0 in all_reduce (torch/distributed/distributed_c10d.py:")
    assert "rank 1 in wait_for_data (ranks.py:" in summary
    assert "all_reduce_step (ranks.py:" in text  # the script's own frame under the collective
    assert "stacks of every rank saved in" in job.logs()  # said in the log, the report too (on_stall: dump/stop)
    OUTPUT.mkdir(parents=True, exist_ok=True)
    (OUTPUT / "hang-stacks.txt").write_text(text)  # a real report, for the record


def test_a_rank_slowed_by_a_sleep_is_a_straggler_and_stacks_show_every_rank(store):
    job = launch(ranks_spec("--steps", "400", "--slow-rank", "1", "--slow-s", "0.25"), store=store)
    try:
        health = wait_for(lambda: (h := job.health())["state"] == "slow" and h, job, "straggler")
        assert [r["slow"] for r in health["ranks"]] == [False, True]
        assert health["reason"].startswith("rank 1 straggles: rank 1 takes 0.3")
        out = io.StringIO()
        with redirect_stdout(out):
            assert cli.main(["stacks", job.id]) == 0
        printed = out.getvalue()
        # both ranks sleep in the loop's body: one group, both pids
        assert re.search(r"^ranks 0-1 \(pid \d+, \d+\) in <module> \(ranks.py:\d+\)$", printed, re.MULTILINE), printed
        assert list((job.dir / "stacks").glob("stacks-*.json"))
        # a custom loop reports heartbeats but has no Trainer to save for it
        with pytest.raises(DoctorError, match="cannot save on request"):
            job.checkpoint()
    finally:
        job.stop()


def stacks_of_every_rank(job: Job) -> StacksReport:
    """Once both ranks have reported a step: the stacks of a running 2-rank ranks.py job. Each rank is found in
    the script, not in a launcher above it (those carry the job's tag too)."""
    try:
        wait_for(lambda: len(job.health()["ranks"]) == 2, job, "heartbeat of both ranks")
        report = job.stacks()
    finally:
        job.stop()
    assert sorted(stack.rank for stack in report.ranks) == [0, 1], report
    assert len({stack.pid for stack in report.ranks}) == 2, report
    assert all(any(frame[1].endswith("ranks.py") for frame in stack.frames) for stack in report.ranks), report
    return report


def test_stacks_find_the_ranks_under_deepspeeds_own_launcher(store):
    """supervisor -> deepspeed.launcher.runner -> deepspeed.launcher.launch -> the two ranks."""
    spec = {**ranks_spec("--steps", "2000"), "launcher": "deepspeed", "parallelism": {"strategy": "deepspeed"}}
    stacks_of_every_rank(launch(spec, store=store))


def test_checkpoint_now_then_fork_with_a_new_learning_rate(store):
    job = launch(
        {
            "task": "text-classification",
            "hardware": {"devices": 2},
            "dataset": {"eval_split": None},  # no evaluation: quicker
            "train": {"max_steps": 400, "batch_size": 4, "learning_rate": 0.001, "logging_steps": 5, "seed": 3},
            "extra": {"lr_scheduler_type": "constant"},  # a rate each record shows as it is
        },
        store=store,
    )
    wait_for(lambda: len(job.health()["ranks"]) == 2, job, "heartbeats from both ranks")
    wait_for(lambda: any(r.get("kind") == "train" for r in job.records()), job, "a logged step")  # the chain has one
    for malformed in ({"id": "x", "at_step": "5"}, {"id": "y", "at_step": None}, {"id": ["z"]}):
        (job.dir / REQUEST_FILE).write_text(json.dumps(malformed))  # what anything that writes the folder may write
        seen = max(rank["step"] for rank in job.health()["ranks"])
        wait_for(lambda seen=seen: min(r["step"] for r in job.health()["ranks"]) > seen + 2, job, "steps past it")
    assert job.logs().count("[nbtoolkit] ignoring the checkpoint request:") == 3
    doctor = DoctorService(job.store)
    with ThreadPoolExecutor(20) as pool:  # twenty clicks at once, through the server's service
        replies = list(pool.map(lambda _: doctor.checkpoint(job.id).message, range(20)))
    assert set(replies) == {f"job {job.id} saves a checkpoint at its next steps and carries on"}
    checkpoint = job.checkpoint(timeout=TIMEOUT)  # the same request: it waits for that checkpoint
    step = checkpoint_step(checkpoint)
    assert is_complete(checkpoint) and os.listdir(job.dir / "output" / KEPT_DIR) == [checkpoint.name]
    wait_for(lambda: job.record.step and job.record.step > step, job, "step after the checkpoint")  # it went on
    job.stop()

    fork = job.fork(str(step), learning_rate=0.01, max_steps=step + 10, **{"hardware.devices": 1})  # one rank: quicker
    assert fork.wait(timeout=TIMEOUT) == "succeeded", fork.logs(tail=30)
    assert fork.record.info["forked_from"] == job.id and fork.record.info["fork_checkpoint"] == str(checkpoint)
    records = fork.records()
    trained = [r for r in records if r.get("kind") == "train"]
    assert step < trained[0]["step"] <= step + 5 and max(r["step"] for r in records) == step + 10
    assert {r["learning_rate"] for r in job.records() if r.get("kind") == "train"} == {0.001}
    assert {r["learning_rate"] for r in trained} == {0.01}  # not the checkpoint's optimizer's 0.001
    assert "learning rate 0.001 -> 0.01 from here" in fork.logs()
    chain = fork.records(chain=True)
    assert chain[0]["job"] == job.id and max(r["step"] for r in chain if r["job"] == job.id) <= step
    assert min(r["step"] for r in chain if r["job"] == fork.id) > step
