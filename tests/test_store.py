"""JobStore: rows, prefixes, paths that cannot escape, lost supervisors, many writers at once."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from nbtoolkit.jobs.store import JobNotFound, JobStore


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
    code = ("import sys; from nbtoolkit.jobs.store import JobStore; s = JobStore(sys.argv[1]);"
            "[s.update(s.create(name='w', task='causal-lm', backend='local').id, step=i) for i in range(25)]")
    writers = [subprocess.Popen([sys.executable, "-c", code, str(home)]) for _ in range(4)]
    assert all(writer.wait(timeout=60) == 0 for writer in writers)
    assert JobStore(home).count() == 100
