"""JobStore: rows, prefixes, paths that cannot escape, lost supervisors, many writers at once."""

from __future__ import annotations

import subprocess
import sys
import time

import psutil
import pytest

from nbtoolkit.runner.store import JobNotFound, JobStore


def test_create_get_list_update(store):
    first = store.create(name="a", task="text-classification", backend="local")
    second = store.create(name="b", task="causal-lm", backend="torchrun", info={"price": 1.5})
    assert store.job_dir(first.id).is_dir()
    assert [record.id for record in store.list()] == [second.id, first.id]
    assert store.update(first.id, step=3, stages=[{"name": "train", "status": "running"}])
    assert store.get(first.id).stages == [{"name": "train", "status": "running"}]
    assert store.get(second.id).info == {"price": 1.5}
    assert store.get(first.id[:5]).id == first.id
    assert store.count(["queued"]) == 2 and store.count(["running"]) == 0


def test_update_guarded_by_status(store):
    record = store.create(name="a", task="causal-lm", backend="local")
    store.update(record.id, status="succeeded")
    assert not store.update(record.id, only_if_status=("queued", "running"), status="lost")
    assert store.get(record.id).status == "succeeded"


@pytest.mark.parametrize("bad", ["../etc", "..", "abc/def", "ABCDEFGH", "zzzzzzzz", "", "1234567890"])
def test_ids_are_validated(store, bad):
    with pytest.raises(JobNotFound):
        store.get(bad)
    with pytest.raises(JobNotFound):
        store.job_dir(bad)


def test_unknown_id(store):
    with pytest.raises(JobNotFound, match="no job 'deadbeef'"):
        store.get("deadbeef")


def test_running_job_whose_supervisor_is_gone_is_lost(store):
    record = store.create(name="a", task="causal-lm", backend="local")
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    store.update(record.id, status="running", supervisor_pid=gone.pid, supervisor_started=time.time())
    checked = store.get(record.id)
    assert checked.status == "lost" and "supervisor process is gone" in checked.message
    assert checked.ended is not None


def test_concurrent_writers(home):
    code = (
        "import sys; from nbtoolkit.runner.store import JobStore; s = JobStore(sys.argv[1]);"
        "[s.update(s.create(name='w', task='causal-lm', backend='local').id, step=i) for i in range(25)]"
    )
    writers = [subprocess.Popen([sys.executable, "-c", code, str(home)]) for _ in range(4)]
    assert all(writer.wait(timeout=60) == 0 for writer in writers)
    assert JobStore(home).count() == 100


def test_a_final_status_is_final(store):
    record = store.create(name="a", task="causal-lm", backend="local")
    assert store.update(record.id, status="succeeded", ended=time.time())
    # a late or second supervisor cannot set it running again, nor anything else
    assert not store.update(record.id, status="running")
    assert not store.update(record.id, only_if_status=("succeeded",), status="lost")
    assert store.get(record.id).status == "succeeded"
    assert store.update(record.id, message="a note")  # other columns still change


HOLD_LOCK = (
    "import fcntl, sys, time; f = open(sys.argv[1], 'a'); fcntl.flock(f, fcntl.LOCK_EX); "
    "print('held', flush=True); time.sleep(600)"
)


def test_a_job_on_another_host_lives_exactly_as_long_as_its_supervisors_lock(store, monkeypatch):
    from nbtoolkit.runner.lock import LOCK_FILE

    monkeypatch.setenv("NBTOOLKIT_HOST", "node-a")
    record = store.create(name="a", task="causal-lm", backend="local")
    # its supervisor (on node-a, sharing this folder) holds the lock; its pid means nothing here
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(store.job_dir(record.id) / LOCK_FILE)], stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout.readline().strip() == "held"
    store.update(record.id, status="running", supervisor_pid=1, supervisor_started=0.0)
    monkeypatch.setenv("NBTOOLKIT_HOST", "node-b")
    try:
        assert store.get(record.id).status == "running"
    finally:
        holder.kill()
        holder.wait()
    checked = store.get(record.id)
    assert checked.status == "lost" and "supervisor process is gone" in checked.message


def test_stop_never_signals_a_process_here_for_a_job_recorded_on_another_host(store, monkeypatch):
    from nbtoolkit.launching.launch import Launch, Stage
    from nbtoolkit.runner import stop, write_launch_files

    monkeypatch.setenv("NBTOOLKIT_HOST", "node-a")
    record = store.create(name="a", task="causal-lm", backend="local")
    write_launch_files(Launch(backend="local", stages=[Stage("train", ["true"])]), store.job_dir(record.id))
    monkeypatch.setenv("NBTOOLKIT_HOST", "node-b")
    # an unrelated process here happens to have the pid (and group) node-a recorded
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
    started = psutil.Process(bystander.pid).create_time()
    store.update(
        record.id,
        status="running",
        created=time.time() - 3600,
        supervisor_pid=bystander.pid,
        supervisor_started=started,
        pgid=bystander.pid,
    )
    try:
        stop(record.id, store=store, grace=0.5)
        time.sleep(0.5)
        assert bystander.poll() is None, "a process of this host was signalled for another host's job"
    finally:
        bystander.kill()
        bystander.wait()


def test_stop_of_a_live_job_on_another_host_asks_its_supervisor_and_signals_nothing_here(store, monkeypatch):
    from nbtoolkit.launching.launch import Launch, Stage
    from nbtoolkit.runner import stop, write_launch_files
    from nbtoolkit.runner.lock import LOCK_FILE

    monkeypatch.setenv("NBTOOLKIT_HOST", "node-a")
    record = store.create(name="a", task="causal-lm", backend="local")
    write_launch_files(
        Launch(backend="local", stages=[Stage("train", ["true"], stop_grace_s=0.1)]), store.job_dir(record.id)
    )
    # node-a's supervisor holds the lock (and answers nothing); its pid is a bystander's here
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(store.job_dir(record.id) / LOCK_FILE)],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert holder.stdout.readline().strip() == "held"
    store.update(
        record.id,
        status="running",
        supervisor_pid=holder.pid,
        supervisor_started=psutil.Process(holder.pid).create_time(),
        pgid=holder.pid,
    )
    monkeypatch.setenv("NBTOOLKIT_HOST", "node-b")
    try:
        after = stop(record.id, store=store, grace=0.1)
        assert after.status == "running" and after.stop_requested is not None  # the request waits for node-a
        assert holder.poll() is None
    finally:
        holder.kill()
        holder.wait()


def store_bad_values(store) -> str:
    """Two jobs, one with a non-numeric loss, a float step and broken JSON written by something else."""
    import sqlite3

    store.create(name="good", task="text-classification", backend="local")
    bad = store.create(name="bad", task="text-classification", backend="local")
    with sqlite3.connect(store.db_path) as conn:
        conn.execute(
            "UPDATE jobs SET loss = 'abc', samples_per_second = 'fast', step = 2.5, info = '{oops' WHERE id = ?",
            (bad.id,),
        )
    return bad.id


def test_one_bad_stored_value_reads_as_empty_and_never_breaks_a_listing(store):
    from nbtoolkit.runner.listing import listing_row

    bad_id = store_bad_values(store)
    rows = {record.name: listing_row(record) for record in store.list()}
    assert set(rows) == {"good", "bad"}
    assert (rows["bad"]["loss"], rows["bad"]["samples/s"], rows["bad"]["progress"]) == ("", "", "")
    record = store.get(bad_id)
    assert (record.loss, record.step, record.info) == (None, None, {})


def test_a_status_this_nbtoolkit_does_not_know_reads_as_lost_and_never_breaks_a_listing(store):
    import sqlite3

    from nbtoolkit.runner.store import JobStatus

    odd = store.create(name="odd", task="text-classification", backend="local")
    store.create(name="fine", task="text-classification", backend="local")
    with sqlite3.connect(store.db_path) as conn:  # as a newer nbtoolkit with another status might write it
        conn.execute("UPDATE jobs SET status = 'paused' WHERE id = ?", (odd.id,))
    assert {record.name: record.status for record in store.list()}["odd"] is JobStatus.LOST
    assert store.get(odd.id).status is JobStatus.LOST


def test_statuses_are_the_active_then_the_final_ones():
    from nbtoolkit.runner.store import ACTIVE, FINAL, STATUSES

    assert ACTIVE == ("queued", "running")
    assert FINAL == ("succeeded", "failed", "stopped", "lost")
    assert STATUSES == ACTIVE + FINAL


def test_a_status_shows_as_its_word():
    from nbtoolkit.runner.store import JobStatus

    shown = (repr(JobStatus.SUCCEEDED), str(JobStatus.SUCCEEDED), f"{JobStatus.LOST}")
    assert shown == ("'succeeded'", "succeeded", "lost")


def test_nbtoolkit_jobs_lists_every_job_beside_one_bad_stored_value(store):
    from tests.test_cli import nbtoolkit

    store_bad_values(store)
    listed = nbtoolkit("jobs").stdout
    assert "good" in listed and "bad" in listed


def test_the_store_records_its_schema_version(store):
    import sqlite3

    from nbtoolkit.runner.store import SCHEMA_VERSION

    with sqlite3.connect(store.db_path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION >= 1


def test_a_corrupt_or_newer_store_is_one_sentence_not_a_traceback(home):
    import sqlite3

    from nbtoolkit.runner.store import SCHEMA_VERSION
    from tests.test_cli import nbtoolkit

    home.mkdir(parents=True)
    (home / "jobs.db").write_bytes(b"this is not sqlite" * 100)
    refused = nbtoolkit("jobs", check=False)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert refused.stderr.startswith(f"nbtoolkit: {home / 'jobs.db'} is not a job store nbtoolkit can read")
    assert "move it aside" in refused.stderr and len(refused.stderr.strip().splitlines()) == 1

    (home / "jobs.db").unlink()
    with sqlite3.connect(home / "jobs.db") as conn:
        conn.execute("PRAGMA user_version = 99")
    refused = nbtoolkit("jobs", check=False)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert (
        f"was written by a newer nbtoolkit (store version 99; this one reads up to {SCHEMA_VERSION})" in refused.stderr
    )


def test_a_server_over_a_corrupt_store_says_so_in_one_line_and_runs_on(home):
    import logging
    from types import SimpleNamespace

    from nbtoolkit.server import _load_jupyter_server_extension

    home.mkdir(parents=True)
    (home / "jobs.db").write_bytes(b"this is not sqlite" * 100)
    said = []
    log = logging.getLogger("fake-server")
    log.error = lambda message, *args: said.append(message % args)
    _load_jupyter_server_extension(SimpleNamespace(web_app=SimpleNamespace(settings={"base_url": "/"}), log=log))
    assert len(said) == 1 and said[0].startswith("nbtoolkit: the job API is off: ") and "move it aside" in said[0]


def test_a_store_from_before_the_reward_column_gains_it(home):
    import sqlite3

    from nbtoolkit.runner import JobStore

    old = JobStore(home).create(name="older", task="grpo", backend="local")
    with sqlite3.connect(home / "jobs.db") as conn:
        conn.execute("ALTER TABLE jobs DROP COLUMN reward")
        conn.execute("PRAGMA user_version = 3")
    store = JobStore(home)
    assert store.get(old.id).reward is None
    store.update(old.id, reward=0.5)
    assert store.get(old.id).reward == 0.5
