"""The run doctor's REST calls through a real Jupyter server: a job's health with its per-rank table, and the
one-sentence 400s where a job cannot be asked (ended, no checkpoint). The calls on running jobs are
tested with real processes in tests/test_run_doctor.py, through the same functions."""

from __future__ import annotations

import asyncio
import json
import time

from nbtoolkit.ranks.heartbeat import RANKS_DIR, checkpoint_request, request_checkpoint
from tests.server.test_contract import conforms
from tests.server.test_handlers import API, error_of, finished_job, get_json


def write_beat(store, job_id: str, rank: int, step: int, ago: float, step_time: float) -> None:
    folder = store.job_dir(job_id) / RANKS_DIR
    folder.mkdir(exist_ok=True)
    beat = {"rank": rank, "step": step, "time": time.time() - ago, "step_time": step_time, "host": "elsewhere"}
    (folder / f"rank-{rank}.json").write_text(json.dumps({**beat, "pid": 4000 + rank, "memory_mb": 512.0}))


async def test_health_has_one_row_per_rank(jp_fetch, store):
    job = store.create(name="far", task="text-classification", backend="slurm")
    store.update(job.id, status="running", host="elsewhere")  # its ranks run on another host: not looked at here
    write_beat(store, job.id, 0, 120, 0.5, 0.2)
    write_beat(store, job.id, 1, 118, 0.4, 0.6)
    health = await get_json(jp_fetch, "jobs", job.id, "health")
    conforms(health, "JobHealth")
    assert health["state"] == "slow" and health["reason"].startswith("rank 1 straggles")
    assert [(r["rank"], r["step"], r["slow"], r["alive"], r["memory_mb"]) for r in health["ranks"]] == [
        (0, 120, False, None, 512.0),
        (1, 118, True, None, 512.0),
    ]


async def test_an_ended_job_cannot_be_asked_for_stacks_checkpoint_or_a_fork_without_checkpoints(jp_fetch, store):
    job = finished_job(store)
    for action, said in [
        ("stacks", f"job {job.id} is succeeded: only a running job's ranks have stacks"),
        ("checkpoint", f"job {job.id} is succeeded: only a running job can be asked for a checkpoint"),
    ]:
        code, body = await error_of(jp_fetch(API, "jobs", job.id, action, method="POST", body=b""))
        assert (code, body["message"]) == (400, said)
    (store.job_dir(job.id) / "spec.json").write_text(json.dumps({"task": "text-classification"}))
    code, body = await error_of(
        jp_fetch(API, "jobs", job.id, "fork", method="POST", body=b"", params={"set": "train.learning_rate=0.01"})
    )
    assert code == 400 and body["message"].startswith(f"job {job.id} has saved no complete checkpoint to fork from")
    code, body = await error_of(jp_fetch(API, "jobs", job.id, "fork", method="POST", body=b"", params={"set": "lr"}))
    assert code == 400 and "is not FIELD=VALUE" in body["message"]


async def test_twenty_checkpoint_posts_at_once_answer_200_with_one_request(jp_fetch, store):
    """Each POST runs in a thread of the server's process: their request files once shared one temporary name
    (1 in 24 answered 500), and each replaced the one before."""
    job = store.create(name="busy", task="text-classification", backend="local")
    store.update(job.id, status="running")
    (store.job_dir(job.id) / RANKS_DIR).mkdir()
    (store.job_dir(job.id) / RANKS_DIR / "rank-0.json").write_text(json.dumps({"rank": 0, "can_checkpoint": True}))
    posts = [jp_fetch(API, "jobs", job.id, "checkpoint", method="POST", body=b"") for _ in range(20)]
    replies = await asyncio.gather(*posts)
    assert {reply.code for reply in replies} == {200}
    request = checkpoint_request(store.job_dir(job.id))
    assert request is not None and request_checkpoint(store.job_dir(job.id)) == request["id"]  # one request
