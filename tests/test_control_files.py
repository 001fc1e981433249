"""The files in a job folder that processes act on, read as untrusted input: a checkpoint request of any type,
size or kind never ends a rank (it is ignored with one line naming it), a heartbeat of any content reads as a
heartbeat or nothing, and twenty requests at once are one checkpoint."""

from __future__ import annotations

import json
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nbtoolkit.ranks.heartbeat import (
    FIELDS,
    KEPT_DIR,
    MAX_FILE_BYTES,
    RANKS_DIR,
    REQUEST_FILE,
    CheckpointRequests,
    checkpoint_request,
    read_heartbeats,
    request_checkpoint,
    write_json,
)
from nbtoolkit.runner.health_watch import HealthWatch
from nbtoolkit.server.run_doctor import DoctorService

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
#: a request's fields with values of any JSON type, valid ones among them
REQUEST = st.fixed_dictionaries(
    {}, optional={"id": JSON | st.text(min_size=1, max_size=70), "at_step": JSON, "saved": JSON, "requested": JSON}
)
MALFORMED = [
    ({"id": "x", "at_step": "5"}, 'at_step is "5", not a step (an integer from 0)'),
    ({"id": "x", "at_step": None}, "at_step is null, not a step"),
    ({"id": "x", "at_step": True}, "at_step is true, not a step"),
    ({"id": "x", "at_step": -1}, "at_step is -1, not a step"),
    ({"id": ["x"]}, 'id is ["x"], not a request id (a string of 1 to 64 characters)'),
    ({"id": ""}, 'id is "", not a request id'),
    ({"at_step": 3}, "id is null, not a request id"),
    ({"id": "x", "saved": 5}, "saved is 5, not a checkpoint's path"),
    ([1, 2], "holds a JSON list, not an object"),
]


@pytest.fixture
def rank_zero(monkeypatch):
    for name in ("RANK", "SLURM_PROCID", "WORLD_SIZE", "SLURM_NTASKS"):
        monkeypatch.delenv(name, raising=False)


def write_request(job_dir: Path, content: object) -> None:
    (job_dir / REQUEST_FILE).unlink(missing_ok=True)
    (job_dir / REQUEST_FILE).write_text(json.dumps(content))


@pytest.mark.parametrize(("content", "said"), MALFORMED)
def test_a_malformed_request_is_ignored_with_one_line_naming_the_file(content, said, tmp_path, rank_zero, capsys):
    write_request(tmp_path, content)
    requests = CheckpointRequests(tmp_path)
    assert not any(requests.due(step) for step in range(10))
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"[nbtoolkit] ignoring the checkpoint request: {tmp_path / REQUEST_FILE}")
    assert said in line
    assert checkpoint_request(tmp_path) is None
    request_id = request_checkpoint(tmp_path)  # a request made now replaces it, and is answered
    assert requests.due(10) and checkpoint_request(tmp_path)["id"] == request_id


def fifo(path: Path) -> None:
    os.mkfifo(path)


def symlink(path: Path) -> None:
    (path.parent / "elsewhere.json").write_text(json.dumps({"id": "x", "at_step": 0}))
    path.symlink_to(path.parent / "elsewhere.json")


def oversized(path: Path) -> None:
    path.write_text(json.dumps({"id": "x", "at_step": 0, "pad": "x" * MAX_FILE_BYTES}))


def folder(path: Path) -> None:
    path.mkdir()


def not_utf8(path: Path) -> None:
    path.write_bytes(b'{"id": "\xff\xfe"}')


def nested_too_deep(path: Path) -> None:
    """Well under the size limit, but deeper than Python's recursion limit lets `json` parse."""
    path.write_text('{"id": ' + "[" * 30000 + "]" * 30000 + "}")


@pytest.mark.parametrize(
    ("plant", "said"),
    [
        (fifo, "is not a regular file"),
        (symlink, "is a symlink, which is not followed"),
        (oversized, f"more than the {MAX_FILE_BYTES} it may"),
        (folder, "is not a regular file"),
        (not_utf8, "is not JSON"),
        (nested_too_deep, "is not JSON"),
    ],
)
def test_a_request_file_of_the_wrong_kind_never_blocks_a_rank(plant, said, tmp_path, rank_zero, capsys):
    plant(tmp_path / REQUEST_FILE)
    requests = CheckpointRequests(tmp_path)
    outcome: list[bool] = []
    reader = threading.Thread(target=lambda: outcome.append(requests.due(5)), daemon=True)
    reader.start()
    reader.join(5)
    if reader.is_alive():  # blocked on the FIFO: let it go before failing
        os.close(os.open(tmp_path / REQUEST_FILE, os.O_WRONLY | os.O_NONBLOCK))
    assert outcome == [False]
    (line,) = capsys.readouterr().err.splitlines()
    assert str(tmp_path / REQUEST_FILE) in line and said in line


def test_a_request_caught_mid_write_is_read_once_written_and_not_called_invalid(tmp_path, rank_zero, capsys):
    """`write_text` truncates, then writes: a rank that looks between finds an empty file. It waits quietly for the
    request (before: "ignoring the checkpoint request: ... not JSON", an extra line for every such write)."""
    (tmp_path / REQUEST_FILE).write_text("")
    requests = CheckpointRequests(tmp_path)
    assert not requests.due(3)
    os.utime(tmp_path / REQUEST_FILE, ns=(1, 1))  # the write lands with its own mtime
    (tmp_path / REQUEST_FILE).write_text(json.dumps({"id": "late", "at_step": 4}))
    assert not requests.due(3) and requests.due(4)
    assert capsys.readouterr().err == ""


def test_only_rank_zero_says_it_ignores_a_request(tmp_path, monkeypatch, capsys):
    write_request(tmp_path, {"id": "x", "at_step": "5"})
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert not CheckpointRequests(tmp_path).due(7)
    assert capsys.readouterr().err == ""


def valid(request: dict) -> bool:
    return (
        isinstance(request.get("id"), str)
        and 0 < len(request["id"]) <= 64
        and (type(request.get("at_step", 0)) is int and request.get("at_step", 0) >= 0)
        and isinstance(request.get("saved", ""), str)
    )


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(content=REQUEST | JSON, step=st.integers(0, 10**6))
def test_any_request_file_leaves_the_rank_stepping(content, step, tmp_path, rank_zero, capsys):
    """Whatever the file holds, `due` answers; it asks for a save only for a valid request, at or after its step."""
    write_request(tmp_path, content)
    due = CheckpointRequests(tmp_path).due(step)
    assert due == (isinstance(content, dict) and valid(content) and step >= content.get("at_step", step))
    said = capsys.readouterr().err.splitlines()
    assert len(said) == (0 if isinstance(content, dict) and valid(content) else 1)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(content=st.fixed_dictionaries({"rank": JSON}, optional=dict.fromkeys(FIELDS, JSON)) | JSON)
def test_any_heartbeat_file_reads_as_a_heartbeat_or_nothing(content, tmp_path):
    (tmp_path / RANKS_DIR).mkdir(exist_ok=True)
    (tmp_path / RANKS_DIR / "rank-0.json").write_text(json.dumps(content))
    for beat in read_heartbeats(tmp_path):
        assert type(beat["rank"]) is int and beat["rank"] >= 0
        assert beat["step"] is None or type(beat["step"]) is int
        assert all(beat[name] is None or isinstance(beat[name], float) for name in ("time", "step_time", "memory_mb"))
        json.dumps(beat, allow_nan=False)


def test_writers_in_threads_of_one_process_never_take_each_others_file(tmp_path):
    """The server's request threads share a pid: each writer's temporary file is its own."""
    path = tmp_path / REQUEST_FILE
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda n: write_json(path, {"id": str(n)}), range(400)))
    assert json.loads(path.read_text())["id"].isdigit() and sorted(os.listdir(tmp_path)) == [REQUEST_FILE]


def test_twenty_checkpoint_requests_at_once_are_one_checkpoint(store, rank_zero):
    """Twenty clicks on "Checkpoint now" through the server's service: every one answered, one checkpoint."""
    record = store.create(name="busy", task="text-classification", backend="local")
    store.update(record.id, status="running")
    job_dir = store.job_dir(record.id)
    (job_dir / RANKS_DIR).mkdir()
    write_json(job_dir / RANKS_DIR / "rank-0.json", {"rank": 0, "step": 3, "can_checkpoint": True})
    doctor = DoctorService(store)
    start = threading.Barrier(20)

    def click(_):
        start.wait()
        return doctor.checkpoint(record.id).message

    with ThreadPoolExecutor(20) as pool:
        replies = list(pool.map(click, range(20)))
    assert replies == [f"job {record.id} saves a checkpoint at its next steps and carries on"] * 20
    request = checkpoint_request(job_dir)
    assert request_checkpoint(job_dir) == request["id"]  # a later one, while it waits, is the same request

    requests = CheckpointRequests(job_dir)
    assert [step for step in range(3, 8) if requests.due(step)] == [3]
    checkpoint = job_dir / "output" / "checkpoint-3"
    checkpoint.mkdir(parents=True)
    (checkpoint / "model.safetensors").write_bytes(b"weights")
    requests.saved(checkpoint)
    assert os.listdir(job_dir / "output" / KEPT_DIR) == ["checkpoint-3"]
    assert (job_dir / "output" / KEPT_DIR).stat().st_mode & 0o777 == 0o700
    assert request_checkpoint(job_dir) != request["id"]  # once saved, a new request is a new one


def test_the_supervisor_hears_of_each_file_among_the_heartbeats_that_is_none(store):
    """What its stall watch reads: a FIFO, a symlink, a file too big, one without a rank and one nested too deep to
    parse are skipped, each named (the supervisor's `_note` says each once in the log); the views read the same
    heartbeats quietly."""
    record = store.create(name="odd", task="text-classification", backend="local")
    store.update(record.id, status="running")
    ranks = store.job_dir(record.id) / RANKS_DIR
    ranks.mkdir()
    write_json(ranks / "rank-0.json", {"rank": 0, "step": 3})
    fifo(ranks / "rank-1.json")
    (ranks / "rank-2.json").symlink_to(ranks / "rank-0.json")
    oversized(ranks / "rank-3.json")
    write_json(ranks / "rank-4.json", {"rank": "4", "step": 3})
    nested_too_deep(ranks / "rank-5.json")
    size = (ranks / "rank-3.json").stat().st_size
    notes: list[str] = []
    HealthWatch(store, record.id).check(print, notes.append)
    assert notes == [
        f"ignoring a heartbeat: {ranks / 'rank-1.json'} is not a regular file",
        f"ignoring a heartbeat: {ranks / 'rank-2.json'} is a symlink, which is not followed",
        f"ignoring a heartbeat: {ranks / 'rank-3.json'} holds {size} bytes, more than the {MAX_FILE_BYTES} it may",
        f'ignoring a heartbeat: {ranks / "rank-4.json"}: rank is "4", not a rank (an integer from 0)',
        f"ignoring a heartbeat: {ranks / 'rank-5.json'} is not JSON",
    ]
    assert [beat["rank"] for beat in read_heartbeats(store.job_dir(record.id))] == [0]
