"""train.budget_usd: a real tiny job warns at 90% of its budget, stops at 100% with a checkpoint, and resumes."""

from __future__ import annotations

import re

import pytest

from nbtoolkit.api import launch
from nbtoolkit.cli import main
from nbtoolkit.lineage.checkpoints import checkpoint_step, last_checkpoint
from nbtoolkit.runner.listing import listing_row
from nbtoolkit.server.models import JobSummary
from nbtoolkit.spec import SpecError, load_spec

#: $36/h: a budget of $0.25 lasts 25 seconds from the job's start, start-up (imports, model load) included
PRICE, BUDGET = 36.0, 0.25


def test_a_job_stops_at_its_budget_with_a_checkpoint_and_resume_continues_it(store, monkeypatch, capsys):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    spec = {
        "task": "text-classification",
        "hardware": {"hourly_price_usd": PRICE},
        "train": {"max_steps": 100000, "batch_size": 8, "logging_steps": 5, "budget_usd": BUDGET},
    }
    first = launch(spec, store=store)
    assert first.wait(timeout=180) == "stopped", first.logs(tail=30)

    budget = [record for record in first.records() if record["kind"] == "budget"]
    # a start-up slower than 90% of the budget (a loaded machine) leaves no step to warn at
    assert [record["reached"] for record in budget] in (["warning", "stopped"], ["stopped"])
    *warned, stop = budget
    assert stop["cost_usd"] >= BUDGET and stop["step"] < 100000
    # nothing costly after the stop: the Trainer's epoch-end evaluation once ran here and overspent by 21%
    assert not [record for record in first.records() if record["kind"] == "eval" and record["time"] > stop["time"]]
    log = first.logs()
    assert "stopping with a checkpoint" in log
    for warning in warned:
        assert 0.9 * BUDGET <= warning["cost_usd"] < BUDGET and warning["step"] < stop["step"]
        assert re.search(r"\[nbtoolkit\] budget: \$0\.2\d+ of the \$0\.25\d* budget spent \(9\d%\)", log)
        assert "the job stops with a checkpoint at 100%" in log

    record = first.record
    # one cost: the stop sentence, the listing, `show`, the panel's body and its budget line say the same figure
    spent = listing_row(record)["cost"]
    assert spent == f"${PRICE * (record.ended - record.started) / 3600:.2f}"  # start-up and checkpoint included
    assert record.message.startswith(f"stopped at its budget: {spent} of the $0.25 budget spent")
    assert f"{spent} of the $0.25 budget" in JobSummary.of(record, []).budget.summary
    assert f"${JobSummary.of(record, []).cost_usd:.2f}" == spent
    capsys.readouterr()
    assert main(["show", first.id]) == 0 and f"      cost: {spent}\n" in capsys.readouterr().out
    assert record.message.endswith(
        f"at step {stop['step']}; it saved a checkpoint there, and `nbtoolkit resume "
        f"{first.id} --budget-usd AMOUNT` continues it with a new budget"
    )
    assert record.info["budget"]["reached"] == "stopped"  # the panel reads it from the job's info
    if len([record for record in first.records() if record["kind"] == "train"]) > 2:  # past the first window
        assert record.seconds_per_step > 0  # the supervisor measured its steady pace while it ran
    assert listing_row(record)["status"] == "stopped" and listing_row(record)["cost"].startswith("$")
    checkpoint = last_checkpoint(first.dir / "output")
    assert checkpoint is not None and checkpoint_step(checkpoint) == stop["step"]
    assert not (first.dir / "output" / "model").exists()  # no final model: the budget ended it mid-run

    at = stop["step"]
    second = first.resume(max_steps=at + 10, budget_usd=10.0)
    assert second.wait(timeout=180) == "succeeded", second.logs(tail=30)
    assert second.spec.train.budget_usd == 10.0 and second.spec.resume == str(checkpoint)
    steps = [r["step"] for r in second.records() if r["kind"] == "train"]
    assert steps and min(steps) > at  # from the checkpoint on, not from step 0
    assert max(r["step"] for r in second.records()) == at + 10  # to its end
    assert not [r for r in second.records() if r["kind"] == "budget"]
    assert (second.dir / "output" / "model").exists()


@pytest.mark.parametrize(
    ("changes", "sentence"),
    [
        (
            {"train": {"budget_usd": 5}},
            (
                "train.budget_usd needs a price to count against: set hardware.hourly_price_usd (USD per instance-hour), "
                "or an instance_type the catalog prices"
            ),
        ),
        (
            {"train": {"budget_usd": 0}, "hardware": {"hourly_price_usd": 1.0}},
            "train.budget_usd: 0 is out of range; it must be > 0.0",
        ),
        (
            {"train": {"budget_usd": 5}, "hardware": {"hourly_price_usd": 1.0}, "script": "train.py"},
            (
                "train.budget_usd is kept by nbtoolkit's own training program; with script: stop your script at its budget "
                "yourself, or remove train.budget_usd"
            ),
        ),
    ],
)
def test_a_budget_without_a_price_or_program_to_keep_it_is_one_sentence(changes, sentence):
    with pytest.raises(SpecError) as refused:
        load_spec({"task": "text-classification", **changes})
    assert str(refused.value) == sentence


def test_a_budget_on_a_catalog_instance_needs_no_price(store):
    spec = load_spec(
        {
            "task": "causal-lm",
            "hardware": {"instance_type": "g5.xlarge", "accelerator": "cpu"},
            "train": {"budget_usd": 5},
        }
    )
    assert spec.hardware.run_price_usd > 0


def test_resume_takes_a_new_budget_from_the_command_line(store, capsys):
    assert main(["resume", "0123abcd", "--budget-usd", "-1"]) == 2
    assert capsys.readouterr().err.startswith("nbtoolkit: no job '0123abcd'")


def test_a_budget_line_in_a_log_reads_back_as_its_record():
    """A SageMaker job's metrics.jsonl stays remote: its budget record reaches the supervisor through the log."""
    from nbtoolkit.metrics import budget
    from nbtoolkit.metrics.parse import LogParser

    warning = budget.budget_record(time=5.0, step=40, cost_usd=0.0921, budget_usd=0.1, state="warning")
    stop = budget.budget_record(time=6.0, step=44, cost_usd=1234.5678, budget_usd=1200.0, state="stopped")
    parser = LogParser(clock=lambda: 7.0)
    lines = f"[rank0]:{budget.log_line(warning)}\n[rank1]:{budget.log_line(warning)}\n{budget.log_line(stop)}\n"
    assert budget.log_line(stop) == (
        "[nbtoolkit] budget: $1,234.57 of the $1,200.00 budget spent (103%) at step 44; stopping with a checkpoint"
    )
    assert parser.feed(lines) == [
        {"time": 7.0, "step": 40, "kind": "budget", "cost_usd": 0.09, "budget_usd": 0.1, "reached": "warning"},
        {"time": 7.0, "step": 44, "kind": "budget", "cost_usd": 1234.57, "budget_usd": 1200.0, "reached": "stopped"},
    ]


def test_a_warning_shows_the_cost_precisely_enough_to_differ_from_the_budget():
    """$0.0364 of $0.04 is 91%: "$0.04 of the $0.04 budget spent (91%)" read as a contradiction."""
    from nbtoolkit.metrics import budget
    from nbtoolkit.metrics.parse import LogParser

    warning = budget.budget_record(time=5.0, step=26, cost_usd=0.0364, budget_usd=0.04, state="warning")
    assert budget.summary(warning) == "$0.036 of the $0.040 budget spent (91%) at step 26"
    (read,) = LogParser().feed(budget.log_line(warning) + "\n")
    assert read["cost_usd"] == 0.036 and read["reached"] == "warning"


def test_every_rank_of_a_distributed_job_stops_at_the_budget_together(store, monkeypatch):
    """Two torchrun ranks (gloo): had one rank stopped alone, the other would wait in its next gradient all-reduce."""
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    spec = {
        "task": "text-classification",
        "hardware": {"devices": 2, "hourly_price_usd": PRICE},
        "train": {"max_steps": 100000, "batch_size": 8, "logging_steps": 5, "budget_usd": BUDGET},
    }
    job = launch(spec, store=store)
    assert job.wait(timeout=240) == "stopped", job.logs(tail=30)
    assert job.record.backend == "torchrun" and "2 process(es)" in job.logs()
    (stop,) = [record for record in job.records() if record.get("reached") == "stopped"]
    assert checkpoint_step(last_checkpoint(job.dir / "output")) == stop["step"]
    assert job.record.message.startswith("stopped at its budget")
