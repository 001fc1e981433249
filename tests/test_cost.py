"""Live cost: every running job shows what it has cost so far and the total it is heading for."""

from __future__ import annotations

import json
import sqlite3
import time

import pytest

from nbtoolkit.metrics.series import Progress
from nbtoolkit.runner.listing import listing_row, projected_cost_usd, remaining_seconds
from nbtoolkit.runner.store import JobStore


def train(step: int, at: float) -> dict:
    return {"kind": "train", "step": step, "max_steps": 100, "time": at, "loss": 1.0}


def test_the_steady_pace_leaves_out_the_first_window_and_counts_evaluation_time():
    progress = Progress()
    # the first window (steps 0-10) took 30 s of warm-up; then 10 steps in 10 s, an eval, 10 steps in 10 s + 6 s
    progress.update([train(10, 130.0), train(20, 140.0), {"kind": "eval", "step": 20, "time": 146.0}, train(30, 156.0)])
    assert progress.seconds_per_step == pytest.approx(26.0 / 20)
    assert Progress().seconds_per_step is None
    one = Progress()
    one.update([train(10, 130.0)])
    assert one.seconds_per_step is None  # one window is all warm-up: no steady pace yet


def running_job(store: JobStore, *, elapsed: float, info: dict, **values):
    record = store.create(name="priced", task="text-classification", backend="local", info=info)
    store.update(record.id, status="running", started=time.time() - elapsed, **values)
    return store.get(record.id)


@pytest.fixture
def alive(monkeypatch):
    monkeypatch.setattr(JobStore, "supervisor_alive", lambda self, record: True)


def test_a_running_job_shows_its_cost_so_far_and_the_total_at_its_steady_pace(store, alive):
    # $3.60/h for 100 s so far = $0.10; 60 steps left at the steady 2 s/step = 120 s more = $0.12
    job = running_job(
        store, elapsed=100.0, info={"hourly_price_usd": 3.6}, step=40, total_steps=100, seconds_per_step=2.0
    )
    assert remaining_seconds(job) == pytest.approx(120.0)
    assert projected_cost_usd(job) == pytest.approx(0.22, abs=0.001)
    row = listing_row(job)
    assert row["cost"] == "$0.10" and row["projected"] == "$0.22"
    assert row["remaining"] == "2:00"

    # before a steady pace is measured: the pace so far (100 s for 40 steps -> 150 s for the 60 left)
    early = running_job(store, elapsed=100.0, info={"hourly_price_usd": 3.6}, step=40, total_steps=100)
    assert remaining_seconds(early) == pytest.approx(150.0, abs=5.0) and listing_row(early)["projected"] == "$0.25"

    unpriced = running_job(store, elapsed=100.0, info={}, step=40, total_steps=100, seconds_per_step=2.0)
    assert listing_row(unpriced)["cost"] == "" and listing_row(unpriced)["projected"] == ""


def test_a_spot_sagemaker_job_projects_its_total_from_billable_time(store, alive):
    """SageMaker's cost so far is what it bills (spot: 30% of training time here); the time left bills alike."""
    info = {"hourly_price_usd": 36.0, "billable_seconds": 30, "training_seconds": 100, "cost_usd": 0.30}
    job = running_job(store, elapsed=110.0, info=info, step=50, total_steps=100, seconds_per_step=2.0)
    # $0.30 so far + 100 s left x $36/h x 30% billed = $0.30 + $0.30
    assert projected_cost_usd(job) == pytest.approx(0.60)
    assert listing_row(job)["cost"] == "$0.30" and listing_row(job)["projected"] == "$0.60"


def test_an_ended_job_has_a_cost_and_no_projection(store):
    record = store.create(name="done", task="text-classification", backend="local", info={"hourly_price_usd": 36.0})
    store.update(record.id, status="running", started=1000.0)
    store.update(record.id, status="succeeded", ended=1100.0)
    done = store.get(record.id)
    assert listing_row(done)["cost"] == "$1.00" and projected_cost_usd(done) is None


def test_a_store_from_before_the_pace_column_gains_it(home):
    """A store written by nbtoolkit with schema 1 (no seconds_per_step) is upgraded in place, its jobs kept."""
    home.mkdir(parents=True)
    with sqlite3.connect(home / "jobs.db") as conn:
        conn.execute(
            "CREATE TABLE jobs (id TEXT PRIMARY KEY, name TEXT NOT NULL, task TEXT NOT NULL, backend TEXT "
            "NOT NULL, status TEXT NOT NULL, created REAL NOT NULL, started REAL, ended REAL, exit_code "
            "INTEGER, host TEXT NOT NULL, supervisor_pid INTEGER, supervisor_started REAL, pgid INTEGER, "
            "remote_name TEXT, stage TEXT, stages TEXT NOT NULL DEFAULT '[]', step INTEGER, total_steps "
            "INTEGER, loss REAL, samples_per_second REAL, message TEXT, resumed_from TEXT, info TEXT NOT "
            "NULL DEFAULT '{}', stop_requested REAL)"
        )
        conn.execute(
            "INSERT INTO jobs (id, name, task, backend, status, created, host) VALUES "
            "('0123abcd', 'old', 'causal-lm', 'local', 'succeeded', 1.0, 'here')"
        )
        conn.execute("PRAGMA user_version = 1")
    store = JobStore(home)
    assert store.get("0123abcd").seconds_per_step is None
    store.update("0123abcd", seconds_per_step=1.5)
    assert store.get("0123abcd").seconds_per_step == 1.5


def test_set_info_changes_one_key_and_keeps_the_others(store):
    record = store.create(name="x", task="causal-lm", backend="sagemaker", info={"cost_usd": 0.5})
    assert store.set_info(record.id, "budget", {"reached": "warning", "cost_usd": 0.09})
    assert store.get(record.id).info == {"cost_usd": 0.5, "budget": {"reached": "warning", "cost_usd": 0.09}}
    assert json.loads(json.dumps(store.get(record.id).info))  # still plain JSON


def test_a_followers_facts_and_the_supervisors_budget_both_stay_when_they_write_at_once(store):
    """The SageMaker follower and the supervisor write one job's info from two processes: a budget written while
    the follower is between reading and writing its facts is kept (it was lost once under load)."""
    from nbtoolkit.backends.sagemaker.follow import JobRecordUpdater

    record = store.create(name="x", task="causal-lm", backend="sagemaker", info={"hourly_price_usd": 1.0})
    budget = {"reached": "stopped", "cost_usd": 0.05}

    class Interleaved:
        """The store as the follower sees it, with the supervisor writing right after each of its reads."""

        def __getattr__(self, name):
            return getattr(store, name)

        def get(self, job_id):
            found = store.get(job_id)
            store.set_info(job_id, "budget", budget)
            return found

    updater = JobRecordUpdater(Interleaved(), record.id)
    updater.phase_facts("train", {"status": "Completed", "billable_seconds": 60, "cost_usd": 0.05})
    info = store.get(record.id).info
    assert info["budget"] == budget and info["status"] == "Completed" and info["hourly_price_usd"] == 1.0
    assert info["billable_seconds"] == 60 and info["sagemaker_jobs"]["train"]["status"] == "Completed"


def test_merge_info_sets_several_keys_in_one_statement_and_keeps_the_others(store):
    record = store.create(name="x", task="causal-lm", backend="slurm", info={"kept": 1})
    assert store.merge_info(record.id, {"slurm_job_id": "42", "partition": None})
    assert store.get(record.id).info == {"kept": 1, "slurm_job_id": "42", "partition": None}


def test_nbtoolkit_jobs_and_percent_jobs_show_cost_and_projected_columns(shell, home, alive, capsys):
    from nbtoolkit.cli import main

    store = JobStore()
    job = running_job(
        store, elapsed=100.0, info={"hourly_price_usd": 3.6}, step=40, total_steps=100, seconds_per_step=2.0
    )
    table = shell.run_line_magic("jobs", "")
    assert (table.loc[job.id, "cost"], table.loc[job.id, "projected"]) == ("$0.10", "$0.22")
    assert main(["jobs"]) == 0
    header, row = capsys.readouterr().out.splitlines()
    assert header.split()[-2:] == ["cost", "projected"] and row.split()[-2:] == ["$0.10", "$0.22"]


def test_a_jobs_live_chart_title_carries_its_cost_and_projected_total(store, alive):
    from nbtoolkit.api import Job
    from nbtoolkit.notebook.charts import JobSource, progress_line

    job = running_job(
        store, elapsed=100.0, info={"hourly_price_usd": 3.6}, step=40, total_steps=100, seconds_per_step=2.0
    )
    state = JobSource(Job(job.id, store)).state()
    assert state.cost == "cost $0.10 · projected $0.22"
    assert progress_line([train(40, 1000.0)], state).endswith("loss 1.0000 · cost $0.10 · projected $0.22")


def test_a_real_running_job_shows_cost_so_far_and_a_projected_total_that_holds(store, monkeypatch):
    """A tiny real job: while it trains, its row has a steady pace, a cost and a projected total; the projection
    made a third of the way through lands near what the whole run cost."""
    from nbtoolkit.api import launch
    from tests.test_jobs import wait_for

    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    job = launch(
        {
            "task": "text-classification",
            "hardware": {"hourly_price_usd": 36.0},
            "train": {"max_steps": 600, "batch_size": 8, "logging_steps": 20, "eval_steps": 100000},
        },
        store=store,
    )
    wait_for(lambda: (job.record.step or 0) >= 200 or not job.record.active, timeout=180)
    running = job.record
    assert running.status == "running", job.logs(tail=20)
    row = listing_row(running)
    projected = projected_cost_usd(running)
    assert running.seconds_per_step > 0 and row["cost"].startswith("$") and row["projected"].startswith("$")
    assert job.wait(timeout=240) == "succeeded"
    final = job.record
    spent = 36.0 * final.elapsed / 3600
    print(f"\nprojected at step {running.step}: ${projected:.4f}; spent: ${spent:.4f} ({projected / spent:.2f}x)")
    assert 0.5 < projected / spent < 2.0  # 1.01x measured here; the other agents on these 2 cores vary the pace
