"""The "Try it" box under a finished job, driven without a kernel: fill the box, call the button's handler,
read the answer it shows. Real tiny jobs, one per task, trained a few steps on CPU."""

from __future__ import annotations

import json
import re

import pytest

from nbtoolkit.api import Job, launch
from nbtoolkit.backends import LaunchError
from nbtoolkit.bundled import ASSETS
from nbtoolkit.notebook.try_it import TryIt
from nbtoolkit.runner import JobStore
from tests.conftest import SCRIPTS

TRAIN = {"max_steps": 3, "batch_size": 4, "logging_steps": 1}
CONTEXT = "The bridge over the Hull was opened by the mayor of Hartmere in 1844."


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> dict[str, Job]:
    """A succeeded tiny job per task, all started at once, one torch thread each."""
    store = JobStore(tmp_path_factory.mktemp("nbhome"))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("OMP_NUM_THREADS", "1")
        jobs = {
            task: launch({"task": task, "train": TRAIN, "dataset": {"eval_split": None}}, store=store)
            for task in ("text-classification", "summarization", "question-answering", "causal-lm")
        }
    for job in jobs.values():
        assert job.wait(timeout=300) == "succeeded", job.logs(tail=20)
    return jobs


def test_classification_shows_the_label_and_its_probabilities(finished):
    box = finished["text-classification"].try_it()
    box.text.value = "i feel wonderful and happy today"
    answer = box.ask()

    labels = {
        json.loads(line)["label"]
        for line in (ASSETS / "data" / "text-classification" / "train.jsonl").read_text().splitlines()
    }
    assert set(answer["probabilities"]) == labels and sum(answer["probabilities"].values()) == pytest.approx(1)
    assert answer["label"] == max(answer["probabilities"], key=answer["probabilities"].get)
    shown = box.answer.value
    assert f"label: <b>{answer['label']}</b>" in shown
    percents = re.findall(r"(\w+)</td><td[^>]*><div class='nbtoolkit-bar'[^>]*></div></td><td[^>]*>([\d.]+)%", shown)
    assert {label: float(value) for label, value in percents} == pytest.approx(
        {label: 100 * p for label, p in answer["probabilities"].items()}, abs=0.051
    )
    assert shown.count("data-marked") == 1  # the chosen label's bar
    assert not box.button.disabled


def test_summarization_and_causal_lm_show_the_generated_text(finished):
    summary = finished["summarization"].try_it()
    summary.text.value = "The city opened a new bridge on Monday after three years of work."
    answer = summary.ask()
    assert set(answer) == {"summary"} and summary.answer.value == f"<p>summary: <b>{answer['summary']}</b></p>"

    continuation = finished["causal-lm"].try_it()
    continuation.text.value = "The river"
    answer = continuation.ask()
    assert set(answer) == {"continuation"} and answer["continuation"]
    assert continuation.answer.value.startswith("<p>The river<b>")


def test_question_answering_asks_for_a_question_and_a_context(finished):
    box = finished["question-answering"].try_it()
    assert box.question in box.children and box.text.description == "Context"
    box.text.value = CONTEXT
    assert box.ask() is None and "type a question and a context first" in box.answer.value
    box.question.value = "Who opened the bridge?"
    answer = box.ask()
    assert answer["answer"] in CONTEXT and 0 < answer["score"] <= 1
    assert f"(score {answer['score']:.3f})" in box.answer.value


def test_only_a_succeeded_job_has_a_box_and_a_failed_predict_is_one_sentence(store, finished):
    running = launch({"task": "text-classification", "script": {"path": str(SCRIPTS / "sleepy.py")}}, store=store)
    try:
        with pytest.raises(LaunchError, match=f"job {running.id} is (queued|running); only a succeeded job"):
            running.try_it()
    finally:
        running.stop()
    box = TryIt(finished["causal-lm"], checkpoint="/nowhere/checkpoint-9")
    box.text.value = "The river"
    assert box.ask() is None
    assert "/nowhere/checkpoint-9 does not exist" in box.answer.value and "Traceback" not in box.answer.value


def test_job_magic_and_display_show_the_box_for_a_succeeded_job(shell, finished, monkeypatch):
    shown = []
    monkeypatch.setattr("nbtoolkit.notebook.job_view.display", shown.append)  # %job shows through job_view
    job = Job(finished["causal-lm"].id, finished["causal-lm"].store)
    monkeypatch.setenv("NBTOOLKIT_HOME", str(job.store.home))
    shell.run_line_magic("job", f"{job.id} --tail 1")
    assert [type(item) for item in shown] == [TryIt] and shown[0].job.id == job.id
