"""The "Try it" box under a finished job, driven without a kernel: fill the box, call the button's handler,
read the answer it shows. Real tiny jobs, one per task, trained a few steps on CPU."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from nbtoolkit.api import Job, launch
from nbtoolkit.backends import LaunchError
from nbtoolkit.inputs.bundled import ASSETS
from nbtoolkit.notebook.try_it import TryIt
from nbtoolkit.runner import JobStore
from nbtoolkit.trained_model import warm_model
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
            for task in ("text-classification", "summarization", "question-answering", "causal-lm", "chat")
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


def test_a_second_answer_comes_from_the_same_warm_process(finished):
    """predict and the Try-it box share one process per job, the model loaded once."""
    job = finished["causal-lm"]
    first = job.predict("The river")
    process = warm_model.running(job.dir)
    box = job.try_it()
    box.text.value = "The river"
    assert box.ask() == first == job.predict(["The river"])[0]
    assert warm_model.running(job.dir) is process and process.alive


def test_the_warm_process_ends_when_idle_and_a_later_answer_starts_another(finished, monkeypatch):
    job = finished["causal-lm"]
    warm_model.stop_all()
    monkeypatch.setenv("NBTOOLKIT_PREDICT_IDLE_S", "0.5")
    first = job.predict("The river")
    process = warm_model.running(job.dir)
    assert process.process.wait(timeout=30) == 0  # it ended by itself
    assert job.predict("The river") == first and warm_model.running(job.dir).pid != process.pid
    warm_model.stop_all()
    assert warm_model.running(job.dir) is None


def test_a_rewritten_model_and_a_moved_job_folder_are_seen(finished):
    """The warm process answers with the model as it is on disk now, and says so when the folder is gone."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    job = finished["text-classification"]
    text = "i feel wonderful and happy today"
    before = job.predict(text)["probabilities"]
    process = warm_model.running(job.dir)
    model_dir = job.dir / "output" / "model"
    model = AutoModelForSequenceClassification.from_pretrained(model_dir).eval()
    with torch.no_grad():
        model.classifier.bias[0] += 3.0
        probabilities = model(**AutoTokenizer.from_pretrained(model_dir)(text, return_tensors="pt")).logits.softmax(-1)
    model.save_pretrained(model_dir)
    expected = {model.config.id2label[index]: value for index, value in enumerate(probabilities[0].tolist())}
    assert job.predict(text)["probabilities"] == pytest.approx(expected, abs=1e-5) != before
    assert warm_model.running(job.dir) is process

    moved = job.dir.with_name(job.dir.name + "-moved")
    job.dir.rename(moved)
    try:
        with pytest.raises(LaunchError, match=f"the job folder {job.dir} no longer exists"):
            job.predict(text)
    finally:
        moved.rename(job.dir)
    assert job.predict(text)["probabilities"] == pytest.approx(expected, abs=1e-5)


def test_the_warm_process_ends_with_the_process_that_started_it(finished):
    """A kernel killed outright leaves no model process behind: its stdin closes, and it ends."""
    job = finished["causal-lm"]
    code = (
        "import sys, time; from nbtoolkit.api import Job; from nbtoolkit.runner import JobStore; "
        "from nbtoolkit.trained_model import warm_model; job = Job(sys.argv[1], JobStore(sys.argv[2])); job.predict('The river'); "
        "print(warm_model.running(job.dir).pid, flush=True); time.sleep(600)"
    )
    kernel = subprocess.Popen(
        [sys.executable, "-c", code, job.id, str(job.store.home)], stdout=subprocess.PIPE, text=True
    )
    pid = int(kernel.stdout.readline())
    os.kill(kernel.pid, signal.SIGKILL)
    kernel.wait()
    deadline = time.monotonic() + 30
    while os.path.exists(f"/proc/{pid}") and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not os.path.exists(f"/proc/{pid}")


def test_evaluate_a_chat_job_on_a_split_and_on_a_file_relative_to_the_caller(finished, tmp_path, monkeypatch):
    job = finished["chat"]
    rows = (ASSETS / "data" / "chat" / "validation.jsonl").read_text().splitlines()
    (tmp_path / "few.jsonl").write_text("\n".join(rows[:4]) + "\n")
    monkeypatch.chdir(tmp_path)
    on_file, on_split = job.evaluate("few.jsonl"), job.evaluate("validation")
    assert {"eval_loss", "eval_mean_token_accuracy"} <= on_file.keys() & on_split.keys()
    assert on_file["eval_loss"] != on_split["eval_loss"]  # 4 conversations against the split's 16
