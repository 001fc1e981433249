"""The four tasks fine-tune their bundled tiny models offline on CPU, through real jobs.

The four runs start together (one thread each) and are checked one by one; each must
finish training in well under a minute, lower its loss and write its eval metrics.
"""

from __future__ import annotations

import math
import time

import pytest

from nbtoolkit.api import Job, launch, resume
from nbtoolkit.backends import LaunchError
from nbtoolkit.cli import main
from nbtoolkit.lineage.checkpoints import checkpoint_step, last_checkpoint
from nbtoolkit.runner import JobStore
from nbtoolkit.tasks import TASKS

TRAIN = {"max_steps": 30, "batch_size": 8, "learning_rate": 0.003, "logging_steps": 10, "eval_on_start": True}
#: task -> (spec changes, the eval metrics it must report)
TASK_RUNS = {
    # the classifier sits on a plateau for its first ~30 steps: twice as long, with larger batches
    "text-classification": (
        {"train": {**TRAIN, "max_steps": 60, "batch_size": 16, "logging_steps": 20}},
        {"eval_accuracy", "eval_f1"},
    ),
    "summarization": (
        {"dataset": {"max_eval_samples": 16, "max_target_length": 32, "prompt_template": "summarize: {input}"}},
        {"eval_rouge1", "eval_rouge2", "eval_rougeL", "eval_rougeLsum", "eval_gen_len"},
    ),
    "question-answering": (
        {"dataset": {"max_train_samples": 240, "max_eval_samples": 24}},
        {"eval_exact_match", "eval_f1"},
    ),
    "causal-lm": ({}, {"eval_perplexity"}),
}


@pytest.fixture(scope="module")
def task_jobs(tmp_path_factory) -> dict[str, Job]:
    """One job per task, all started at once, each with one torch thread (2 cores, 4 jobs)."""
    store = JobStore(tmp_path_factory.mktemp("nbhome"))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("OMP_NUM_THREADS", "1")
        jobs = {
            task: launch({"task": task, "train": TRAIN, **changes}, store=store)
            for task, (changes, _) in TASK_RUNS.items()
        }
    for job in jobs.values():
        job.wait(timeout=240)
    return jobs


@pytest.mark.parametrize("task", TASK_RUNS)
def test_task_fine_tunes_its_bundled_model(task_jobs, task):
    job = task_jobs[task]
    assert job.status == "succeeded", job.logs(tail=30)
    assert f"model {TASKS[task].bundled_model}" in job.logs()
    records = job.records()
    train = [r for r in records if r["kind"] == "train"]
    evals = [r for r in records if r["kind"] == "eval"]
    (summary,) = [r for r in records if r["kind"] == "summary"]

    train_spec = job.spec.train
    assert [r["step"] for r in train] == list(
        range(train_spec.logging_steps, train_spec.max_steps + 1, train_spec.logging_steps)
    )
    assert train[-1]["loss"] < train[0]["loss"]
    assert evals[0]["step"] == 0 and evals[-1]["step"] == train_spec.max_steps
    assert evals[-1]["eval_loss"] < evals[0]["eval_loss"]
    expected = TASK_RUNS[task][1]
    assert expected <= evals[-1].keys(), f"missing {expected - evals[-1].keys()}"
    assert all(0.0 <= evals[-1][key] <= 1.0 for key in expected if key not in ("eval_perplexity", "eval_gen_len"))
    if task == "causal-lm":
        assert evals[-1]["eval_perplexity"] == pytest.approx(math.exp(evals[-1]["eval_loss"]))
    assert summary["train_runtime"] < 60
    # steady-state throughput (first window left out) next to the Trainer's own average
    assert summary["steady_samples_per_second"] > 0 and summary["steady_tokens_per_second"] > 0
    assert summary["train_samples_per_second"] > 0 and summary["peak_memory_mb"] > 100


def test_wrong_task_model_pairing_fails_with_one_sentence(store, capsys):
    job = launch({"task": "causal-lm", "model": "nbtoolkit/tiny-t5"}, store=store)
    assert job.wait(timeout=120) == "failed"
    assert job.record.message == (
        "model 'nbtoolkit/tiny-t5' is a t5 encoder-decoder model, but task 'causal-lm' needs a decoder-only "
        "language model such as gpt2, llama or qwen2; choose such a model, or leave model empty for the bundled "
        "nbtoolkit/tiny-gpt2"
    )
    assert not (job.dir / "output" / "model").exists()
    with pytest.raises(LaunchError, match=f"job {job.id} saved no complete checkpoint to resume from"):
        resume(job.id, store=store)
    assert main(["resume", job.id]) == 2
    assert capsys.readouterr().err.startswith(f"nbtoolkit: job {job.id} saved no complete checkpoint")


def test_stopped_job_resumes_as_a_new_job_that_continues_the_global_step(store, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    spec = {
        "task": "text-classification",
        "train": {"max_steps": 100000, "batch_size": 8, "logging_steps": 5, "save_steps": 10, "learning_rate": 0.003},
    }
    first = launch(spec, store=store)
    deadline = time.monotonic() + 120
    while last_checkpoint(first.dir / "output") is None:
        assert first.record.active and time.monotonic() < deadline, first.logs(tail=20)
        time.sleep(0.2)
    with pytest.raises(LaunchError, match="is still running; stop it before resuming it"):
        first.resume()
    assert first.stop() == "stopped"
    checkpoint = last_checkpoint(first.dir / "output")
    at = checkpoint_step(checkpoint)
    assert at >= 10 and at % 10 == 0

    second = first.resume(max_steps=at + 10)
    assert second.wait(timeout=120) == "succeeded", second.logs(tail=30)
    assert second.record.resumed_from == first.id and second.id != first.id
    assert second.spec.resume == str(checkpoint)
    steps = [r["step"] for r in second.records() if r["kind"] == "train"]
    assert steps == [at + 5, at + 10]
    assert checkpoint_step(last_checkpoint(second.dir / "output")) == at + 10

    series = [r for r in second.records(chain=True) if r["kind"] == "train"]
    chained = [r["step"] for r in series]
    assert chained == sorted(set(chained)) and chained[-1] == at + 10
    assert {r["job"] for r in series if r["step"] <= at} == {first.id}
    assert {r["job"] for r in series if r["step"] > at} == {second.id}
