"""A local job of nbtoolkit's program forks its supervisor and stage from a warm interpreter made by the job before
it: it trains as a job started anew does, its processes carry its tag and command line, a stop ends them, and a
killed supervisor takes its stage with it. One interpreter serves the file's jobs."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest

from nbtoolkit.api import Job, launch, warm_profile
from nbtoolkit.launching.launch import Launch, Stage
from nbtoolkit.runner import JobStore, warm_interpreter
from nbtoolkit.runner.control import _forks_from_warm
from nbtoolkit.runner.stacks import rank_processes
from nbtoolkit.runner.tree import tagged_processes
from nbtoolkit.runner.warm_interpreter import MODULE, WarmProfile
from nbtoolkit.spec import load_spec

SPEC = {"task": "text-classification", "train": {"max_steps": 3, "logging_steps": 1, "seed": 7}}
LONG = {"task": "text-classification", "train": {"max_steps": 100000, "logging_steps": 1}}


def forked_from_warm(job: Job) -> bool:
    """The job's supervisor is a child of a warm interpreter (a supervisor started anew is this process's)."""
    parent = psutil.Process(job.record.supervisor_pid).parent()
    return parent is not None and MODULE in " ".join(parent.cmdline())


def wait_for(condition, timeout: float = 120.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if found := condition():
            return found
        time.sleep(0.2)
    raise AssertionError(f"not within {timeout:.0f} s")


def losses(job: Job) -> list[float]:
    return [record["loss"] for record in job.records() if record.get("kind") == "train"]


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> JobStore:
    return JobStore(tmp_path_factory.mktemp("nbhome"))


@pytest.fixture(scope="module")
def cold(store) -> Job:
    """A job like SPEC started anew (NBTOOLKIT_WARM=0: another file's jobs may have made an interpreter already)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("NBTOOLKIT_WARM", "0")
        job = launch(SPEC, store=store)
    assert psutil.Process(job.record.supervisor_pid).ppid() == os.getpid()  # this process started it
    assert job.wait(timeout=300) == "succeeded", job.logs(tail=30)
    return job


@pytest.fixture(scope="module")
def warm(store, cold) -> Job:
    """A job like the first, once an interpreter for such jobs listens (one asked before that starts anew and starts
    the interpreter)."""

    def warm_job() -> Job | None:
        job = launch(SPEC, store=store)
        forked = forked_from_warm(job)  # asked at once: the supervisor ends with the job
        assert job.wait(timeout=300) == "succeeded", job.logs(tail=30)
        return job if forked else None

    return wait_for(warm_job, timeout=240)


def running_warm(store: JobStore) -> tuple[Job, psutil.Process, psutil.Process]:
    """A long job forked from the warm interpreter, once it trains; its supervisor and its stage. One started anew
    instead (the interpreter ended meanwhile: another test file's jobs took the last of the MOST places, another
    suite of this user ended its interpreters) is stopped, and the next one forks from the interpreter it started."""

    def forked_long_job() -> Job | None:
        job = launch(LONG, store=store)
        if forked_from_warm(job):
            return job
        job.stop()
        return None

    job = wait_for(forked_long_job, timeout=240)
    wait_for(lambda: losses(job), timeout=60)
    supervisor = psutil.Process(job.record.supervisor_pid)
    [stage] = [child for child in supervisor.children() if "nbtoolkit.runner.watcher" not in child.cmdline()]
    return job, supervisor, stage


def test_a_job_forked_from_the_warm_interpreter_trains_as_one_started_anew(cold, warm):
    assert losses(warm) == losses(cold)  # the same seed and data: the same steps, to the last digit
    assert (warm.dir / "output" / "model" / "config.json").is_file()
    assert "stage train succeeded" in warm.logs()


def test_a_warm_jobs_processes_carry_its_tag_and_command_line_and_a_stop_ends_them(store, warm):
    job, supervisor, stage = running_warm(store)
    record = job.record
    assert {supervisor.pid, stage.pid} <= {process.pid for process in tagged_processes(job.id, store.home)}
    assert supervisor.cmdline()[1:4] == ["-m", "nbtoolkit.runner.supervisor", job.id]
    assert stage.cmdline()[1:5] == ["-m", "nbtoolkit.train", "--spec", "spec.json"]
    assert os.getpgid(stage.pid) == stage.pid  # its own session and group, as a stage started anew
    assert rank_processes(record, store) == {0: stage.pid}  # the run doctor finds its rank
    assert job.stop() == "stopped"
    wait_for(lambda: not tagged_processes(job.id, store.home), timeout=30)  # the supervisor on its way out too
    assert losses(job)  # its metrics and log stay readable
    assert "stop requested" in job.logs()


def test_a_killed_warm_supervisor_takes_its_stage_with_it_and_the_job_is_lost(store, warm):
    job, supervisor, stage = running_warm(store)
    supervisor.send_signal(signal.SIGKILL)
    wait_for(lambda: not stage.is_running() or stage.status() == psutil.STATUS_ZOMBIE, timeout=30)
    assert wait_for(lambda: job.record.status == "lost", timeout=60)


def test_what_never_forks_from_a_warm_interpreter(monkeypatch):
    program = Launch(backend="local", stages=[Stage(name="train", argv=[sys.executable, "-m", "nbtoolkit.train"])])
    script = Launch(backend="local", stages=[Stage(name="train", argv=[sys.executable, "train.py"])])
    two_stages = Launch(backend="local", stages=[*program.stages, Stage(name="eval", argv=program.stages[0].argv)])
    assert _forks_from_warm(program)
    assert not _forks_from_warm(script)  # a user's script
    assert not _forks_from_warm(two_stages)
    assert warm_profile(load_spec({"task": "text-classification"})) is not None
    # a run whose spec says it starts anew: torch.compile fixes its cache folder as torch is imported
    assert warm_profile(load_spec({"task": "text-classification", "compile": "torch"})) is None
    monkeypatch.setenv("NBTOOLKIT_WARM", "0")
    assert not _forks_from_warm(program)


def test_an_interpreter_whose_loaded_files_changed_or_went_is_stale(tmp_path, monkeypatch):
    loaded = tmp_path / "plugin.py"
    loaded.write_text("VERSION = 1\n")
    monkeypatch.setattr(warm_interpreter, "_imported", {str(loaded): loaded.stat().st_mtime_ns})
    assert not warm_interpreter._stale()
    os.utime(loaded, ns=(loaded.stat().st_atime_ns, loaded.stat().st_mtime_ns + 1_000_000))
    assert warm_interpreter._stale()  # an edit (a pip install, a plugin's new version): jobs start anew
    monkeypatch.setattr(warm_interpreter, "_imported", {str(tmp_path / "gone.py"): 0})
    assert warm_interpreter._stale()


def test_a_socket_folder_that_is_not_this_users_own_starts_nothing_and_raises_nothing(tmp_path, monkeypatch):
    taken = tmp_path / "nbtoolkit-warm"
    taken.write_text("a file where the folder would be")
    monkeypatch.setattr(warm_interpreter, "SOCKETS", taken)
    profile = WarmProfile((), "nbtoolkit.tasks.classification.train")
    warm_interpreter.start("k" * 20, dict(os.environ), profile)  # no FileExistsError: the job starts anew
    assert warm_interpreter.adopt("k" * 20, "job", dict(os.environ), tmp_path) is None
    monkeypatch.setattr(warm_interpreter, "SOCKETS", tmp_path / ("d" * 100))
    assert not warm_interpreter.enabled()  # no socket path of 108 bytes fits there


@pytest.mark.parametrize("wrote", ["", "a warning it printed\n"])
def test_an_interpreter_that_ends_leaves_no_file_but_a_log_with_something_in_it(wrote):
    """Keys vary with the environment, and each ended interpreter left its lock and an empty log behind (688 in a
    day's runs here): it now removes them as it ends, keeping a log that says something."""
    folder = Path(tempfile.mkdtemp(prefix="w", dir="/tmp"))  # short: a socket's path is at most 107 bytes
    try:
        sockets = folder / f"nbtoolkit-warm-{os.getuid()}"
        sockets.mkdir(mode=0o700)
        (sockets / "k1.log").write_text(wrote)  # as `start` opens it for the interpreter's errors
        serve_briefly = (
            "from nbtoolkit.runner import warm_interpreter as w\n"
            "w._warm_up = lambda profile: True  # what it imports is not what this test looks at\n"
            "raise SystemExit(w.serve('k1', w.WarmProfile((), 'json')))"
        )
        env = {**os.environ, "TMPDIR": str(folder), warm_interpreter.IDLE_ENV: "0.2"}
        subprocess.run([sys.executable, "-c", serve_briefly], env=env, check=True, timeout=60)
        assert sorted(path.name for path in sockets.iterdir()) == (["k1.log"] if wrote else [])
    finally:
        shutil.rmtree(folder)
