"""Job.evaluate's program (nbtoolkit.train.inference) on job folders made here, without training: a preference job
measured against the model it started from, and a file to evaluate on checked as launch checks the job's own."""

from __future__ import annotations

import json
import math

import pytest
import torch
from transformers import AutoModelForCausalLM, set_seed

from nbtoolkit.spec import load_spec
from nbtoolkit.train.chat_template import chat_tokenizer, fit_model
from nbtoolkit.train.errors import TrainError
from nbtoolkit.train.inference import MODEL_DIR, evaluate
from nbtoolkit.train.models import load_model


def finished_job(folder, spec: dict, trained: bool) -> None:
    """A job folder as a run leaves it: the bundled model built from the run's seed as the run builds it, with its
    weights (a LoRA job: its adapter's) moved off the start when `trained`."""
    from nbtoolkit.train.adapters import save_base, wrap

    spec = load_spec(spec)
    set_seed(spec.train.seed)
    tokenizer = chat_tokenizer(spec)
    model = load_model(AutoModelForCausalLM, spec, tokenizer)
    fit_model(model, tokenizer)
    model_dir = folder / MODEL_DIR
    if spec.adapter is not None:
        save_base(model, spec, model_dir)
        model = wrap(model, spec)
    moved = [p for name, p in model.named_parameters() if spec.adapter is None or "lora_B" in name]
    if trained:
        torch.manual_seed(1)
        with torch.no_grad():
            for parameter in moved:
                parameter.add_(torch.randn_like(parameter) * 0.05)
    model.save_pretrained(model_dir)
    tokenizer.save_pretrained(model_dir)


@pytest.mark.parametrize("adapter", [None, {"r": 8}], ids=["full", "lora"])
def test_a_preference_job_is_measured_against_the_model_it_started_from(adapter, tmp_path, monkeypatch):
    """Before, the reference was a copy of the trained model itself: every reward 0 and the loss log 2."""
    spec = {"task": "preference", "train": {"seed": 3}, **({"adapter": adapter} if adapter else {})}
    results = {}
    for trained in (False, True):
        folder = tmp_path / str(trained)
        finished_job(folder, spec, trained)
        monkeypatch.chdir(folder)
        results[trained] = evaluate(load_spec(spec), "validation")
    # untrained, the model is its own start: the reference rebuilt (a bundled model from the run's seed) is the same
    assert results[False]["eval_rewards/chosen"] == pytest.approx(0, abs=1e-6)
    assert results[False]["eval_loss"] == pytest.approx(math.log(2), abs=1e-6)
    moved = results[True]
    assert abs(moved["eval_rewards/chosen"]) > 1e-3 and abs(moved["eval_rewards/rejected"]) > 1e-3, moved
    assert abs(moved["eval_loss"] - math.log(2)) > 1e-4, moved


def test_a_chat_file_without_replies_is_refused_in_one_sentence_before_the_model_loads(tmp_path, monkeypatch):
    """Before, a cut traceback from TRL's tokenizing; the folder here has no model at all."""
    monkeypatch.chdir(tmp_path)
    unanswered = tmp_path / "questions.jsonl"
    unanswered.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"}]}) + "\n")
    with pytest.raises(TrainError) as refused:
        evaluate(load_spec({"task": "chat"}), str(unanswered))
    assert str(refused.value) == (
        f"the file to evaluate on ({unanswered}): row 1 has no assistant turn, so nothing in it trains (the loss is "
        "on the assistant's replies); add the reply, remove the row, or set extra: {assistant_only_loss: false}"
    )
