"""LoRA adapters: the spec's rules, the target check, and real LoRA jobs of the four bundled tiny models.

Each job trains adapters only (the base frozen), saves the adapter alone, and `merge` writes a full
model that predicts exactly what base + adapter predict, and differs from the base only in the
wrapped modules (and the task's new head, which classification and QA must train).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from nbtoolkit.api import Job, launch
from nbtoolkit.backends import LaunchError
from nbtoolkit.cli import main as cli_main
from nbtoolkit.runner import JobStore
from nbtoolkit.spec import SpecError, load_spec

pytestmark = pytest.mark.heavy  # minutes of real training: run first under pytest -n (tests/conftest.py)

TRAIN = {"max_steps": 30, "batch_size": 8, "learning_rate": 0.01, "logging_steps": 10, "save_steps": 15}
#: task -> spec changes (the classifier sits on a plateau early: longer, larger batches)
TASK_RUNS = {
    "text-classification": {
        "train": {**TRAIN, "max_steps": 60, "batch_size": 16, "logging_steps": 20, "save_steps": 30}
    },
    "summarization": {"dataset": {"max_eval_samples": 8, "max_target_length": 32}},
    "question-answering": {"dataset": {"max_train_samples": 240, "max_eval_samples": 16}},
    "causal-lm": {},
}
#: the new task heads PEFT trains beside the adapters (modules_to_save)
HEADS = ("classifier", "qa_outputs")


def test_qlora_is_refused_off_cuda_in_one_sentence():
    with pytest.raises(SpecError) as caught:
        load_spec({"task": "causal-lm", "adapter": {"type": "qlora"}})
    assert str(caught.value) == (
        "adapter.type 'qlora' loads the base model in 4 bits with bitsandbytes, which "
        "needs a cuda accelerator (hardware.accelerator is 'cpu'); use type: lora"
    )


@pytest.mark.parametrize(
    "adapter, words",
    [
        ({"target_modules": []}, "adapter.target_modules is empty"),
        ({"r": 0}, "adapter.r: 0 is out of range; it must be >= 1"),
        ({"type": "dora"}, "adapter.type: 'dora' is not valid; expected 'lora' or 'qlora'"),
    ],
)
def test_bad_adapter_fields_name_the_field(adapter, words):
    with pytest.raises(SpecError, match=words.replace("(", r"\(").replace(")", r"\)")):
        load_spec({"task": "causal-lm", "adapter": adapter})


def test_unknown_target_module_is_one_sentence_naming_the_real_ones():
    from nbtoolkit.train.adapters import check_adapter
    from nbtoolkit.train.errors import TrainError
    from nbtoolkit.train.models import model_config

    spec = load_spec({"task": "causal-lm", "adapter": {"target_modules": ["c_attn", "q_proj"]}})
    with pytest.raises(TrainError) as caught:
        check_adapter(spec, model_config(spec.model_name))
    assert str(caught.value) == (
        "adapter.target_modules q_proj not found in model 'nbtoolkit/tiny-gpt2' (gpt2); "
        "its linear layers are c_attn, c_fc, c_proj, lm_head"
    )


def test_wrong_target_is_refused_before_anything_starts(store):
    """Before the preflight it failed the job 20 s in; now launch refuses it and starts nothing."""
    with pytest.raises(LaunchError, match="^adapter.target_modules query not found in model 'nbtoolkit/tiny-gpt2'"):
        launch({"task": "causal-lm", "adapter": {"target_modules": ["query"]}, "train": TRAIN}, store=store)
    assert store.list() == []


@pytest.fixture(scope="module")
def lora_jobs(tmp_path_factory) -> dict[str, Job]:
    """One LoRA job per task, all started at once, one torch thread each (2 cores)."""
    store = JobStore(tmp_path_factory.mktemp("nbhome"))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("OMP_NUM_THREADS", "1")
        jobs = {
            task: launch({"task": task, "adapter": {"r": 8}, "train": TRAIN, **changes}, store=store)
            for task, changes in TASK_RUNS.items()
        }
    for job in jobs.values():
        job.wait(timeout=300)
    return jobs


def model_inputs(job: Job):
    """A few tokenized training texts of the job's data, as the model takes them."""
    from transformers import AutoTokenizer

    from nbtoolkit.inputs.bundled import ASSETS

    spec = job.spec
    rows = [json.loads(line) for line in (ASSETS / "data" / spec.task / "train.jsonl").read_text().splitlines()[:4]]
    text = {
        "text-classification": "text",
        "summarization": "article",
        "question-answering": "context",
        "causal-lm": "text",
    }[spec.task]
    tokenizer = AutoTokenizer.from_pretrained(job.dir / "output" / "model")
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    inputs = dict(
        tokenizer([row[text] for row in rows], return_tensors="pt", padding=True, truncation=True, max_length=64)
    )
    if spec.task == "summarization":
        inputs["decoder_input_ids"] = inputs["input_ids"][:, :8]
    return inputs


@pytest.mark.parametrize("task", TASK_RUNS)
def test_lora_job_trains_adapter_only_and_merges_to_the_same_model(lora_jobs, task):
    import torch
    from peft import PeftModel
    from safetensors.torch import load_file

    from nbtoolkit.train.adapters import auto_class

    job = lora_jobs[task]
    assert job.status == "succeeded", job.logs(tail=30)
    assert "lora r=8:" in job.logs() and "M trainable" in job.logs()
    losses = [record["loss"] for record in job.records() if record["kind"] == "train"]
    assert losses[-1] < losses[0], losses

    model_dir = job.dir / "output" / "model"
    saved = load_file(model_dir / "adapter_model.safetensors")
    assert saved and all("lora_" in name or any(head in name for head in HEADS) for name in saved), list(saved)
    assert not (model_dir / "model.safetensors").exists()  # the adapter alone, not a full model

    merged_dir = job.merge()
    base = auto_class(task).from_pretrained(model_dir / "base").eval()
    base_state = {name: tensor.clone() for name, tensor in base.state_dict().items()}
    with_adapter = PeftModel.from_pretrained(base, model_dir).eval()
    merged = auto_class(task).from_pretrained(merged_dir).eval()
    inputs = model_inputs(job)
    with torch.no_grad():
        expected, got = with_adapter(**inputs), merged(**inputs)
    for key in ("logits", "start_logits", "end_logits"):
        if key in expected:
            torch.testing.assert_close(got[key], expected[key], rtol=1e-4, atol=1e-4)

    # all-linear is saved resolved, as the wrapped modules' full names
    targets = {
        name.rpartition(".")[2]
        for name in json.loads((model_dir / "adapter_config.json").read_text())["target_modules"]
    }
    changed = {name for name, tensor in merged.state_dict().items() if not torch.equal(tensor, base_state[name])}
    owners = {name.split(".")[-2] for name in changed}
    assert owners and owners <= targets | set(HEADS), sorted(changed)
    assert targets <= owners  # every wrapped module learned something


#: one input per task, as Job.predict takes it, and the keys of its answer
PREDICT = {
    "text-classification": ("i feel wonderful and happy today", {"label", "probabilities"}),
    "summarization": ("The city opened a new bridge on Monday after three years of work.", {"summary"}),
    "question-answering": (
        {"question": "Who opened the bridge?", "context": "The mayor opened the bridge."},
        {"answer", "score"},
    ),
    "causal-lm": ("The river", {"continuation"}),
}


@pytest.mark.parametrize("task", TASK_RUNS)
def test_predict_answers_in_the_tasks_terms_from_the_final_model_or_a_checkpoint(lora_jobs, task):
    job = lora_jobs[task]
    given, keys = PREDICT[task]
    final = job.predict(given)
    assert set(final) == keys
    (checkpoint,) = [
        path
        for path in (job.dir / "output").glob("checkpoint-*")
        if path.name != "checkpoint-60" and path.name != f"checkpoint-{job.spec.train.max_steps}"
    ]
    early, again = job.predict([given, given], checkpoint=checkpoint)
    assert early == again and set(early) == keys
    if task == "text-classification":
        assert final["label"] == max(final["probabilities"], key=final["probabilities"].get)
        assert sum(final["probabilities"].values()) == pytest.approx(1)
        assert final["probabilities"] != early["probabilities"]  # the checkpoint is an earlier model
    if task == "question-answering":
        assert final["answer"] in given["context"] and 0 < final["score"] <= 1


def test_predict_matches_the_merged_model(lora_jobs):
    """The label probabilities Job.predict gives (base + adapter) are the merged model's softmax."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    job = lora_jobs["text-classification"]
    text = PREDICT["text-classification"][0]
    merged_dir = job.merge()
    model = AutoModelForSequenceClassification.from_pretrained(merged_dir).eval()
    with torch.no_grad():
        probabilities = model(**AutoTokenizer.from_pretrained(merged_dir)(text, return_tensors="pt")).logits.softmax(
            -1
        )[0]
    expected = {model.config.id2label[index]: value for index, value in enumerate(probabilities.tolist())}
    assert job.predict(text)["probabilities"] == pytest.approx(expected, abs=1e-5)


def test_evaluate_on_a_file_and_on_a_split(lora_jobs, tmp_path):
    from nbtoolkit.backends import LaunchError
    from nbtoolkit.inputs.bundled import ASSETS

    job = lora_jobs["text-classification"]
    rows = (ASSETS / "data" / "text-classification" / "validation.jsonl").read_text().splitlines()
    few = tmp_path / "few.jsonl"
    few.write_text("\n".join(rows[:10]) + "\n")
    on_file = job.evaluate(few)
    on_split = job.evaluate("validation")
    assert {"eval_loss", "eval_accuracy", "eval_f1"} <= on_file.keys()
    assert on_file["eval_accuracy"] * 10 == pytest.approx(round(on_file["eval_accuracy"] * 10))  # of 10 examples
    final = [record for record in job.records() if record["kind"] == "eval"][-1]
    assert on_split["eval_loss"] == pytest.approx(final["eval_loss"], rel=1e-4)  # the job's own last eval
    with pytest.raises(LaunchError, match="the dataset has no 'test' split"):
        job.evaluate("test")


def test_push_to_hub_sends_the_adapter_and_a_model_card(lora_jobs, monkeypatch):
    """Tested up to the request: huggingface_hub's create_repo and upload_folder are replaced (no Hub here);
    what they receive is what would be sent."""
    from huggingface_hub import HfApi

    sent = {}
    monkeypatch.setattr(
        HfApi,
        "create_repo",
        lambda self, repo_id, **options: sent.update(repo=(repo_id, options)) or f"https://huggingface.co/{repo_id}",
    )
    monkeypatch.setattr(HfApi, "upload_folder", lambda self, **request: sent.update(upload=request))
    job = lora_jobs["causal-lm"]
    assert job.push_to_hub("someone/tiny-gpt2-lora") == "https://huggingface.co/someone/tiny-gpt2-lora"
    assert sent["repo"] == ("someone/tiny-gpt2-lora", {"private": True, "exist_ok": True})
    upload = sent["upload"]
    assert upload["repo_id"] == "someone/tiny-gpt2-lora" and upload["folder_path"] == str(job.dir / "output" / "model")
    assert "training_args.bin" in upload["ignore_patterns"] and "base/*" not in upload["ignore_patterns"]  # bundled
    card = (job.dir / "output" / "model" / "README.md").read_text()
    final = [record for record in job.records() if record["kind"] == "eval"][-1]
    assert card.startswith("---\nlibrary_name: peft\npipeline_tag: text-generation\n")
    assert "A LoRA adapter for nbtoolkit/tiny-gpt2, task causal-lm" in card
    assert "- learning rate: 0.01" in card and "- lora r: 8" in card and "- max_steps: 30" in card
    assert (
        f"- eval_loss: {final['eval_loss']:.4g}" in card
        and f"- eval_perplexity: {final['eval_perplexity']:.4g}" in card
    )
    assert re.search(r"^- training time: (\d+:)?\d+:\d\d \(local launcher\)$", card, re.M)
    assert "- cost: not known (no hourly price)" in card


@pytest.mark.parametrize(
    "parts",
    [
        {"hardware": {"devices": 2}, "parallelism": {"strategy": "ddp"}},
        {"hardware": {"devices": 2}, "parallelism": {"strategy": "deepspeed", "zero_stage": 2}},
        {"hardware": {"devices": 2}, "parallelism": {"strategy": "deepspeed", "zero_stage": 3}},
    ],
    ids=["ddp", "zero2", "zero3"],
)
def test_lora_trains_under_ddp_and_deepspeed(store, parts):
    """Two CPU processes (gloo): the adapter trains, is saved alone, and merges."""
    from safetensors.torch import load_file

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("OMP_NUM_THREADS", "1")
        job = launch(
            {
                "task": "causal-lm",
                "adapter": {"r": 8},
                **parts,
                "train": {**TRAIN, "max_steps": 12, "logging_steps": 4, "save_steps": None},
            },
            store=store,
        )
    assert job.wait(timeout=300) == "succeeded", job.logs(tail=40)
    losses = [record["loss"] for record in job.records() if record["kind"] == "train"]
    assert len(losses) == 3 and losses[-1] < losses[0], losses
    saved = load_file(job.dir / "output" / "model" / "adapter_model.safetensors")
    assert saved and all("lora_" in name for name in saved) and all(t.numel() for t in saved.values())
    assert (job.merge() / "model.safetensors").is_file()


def test_without_peft_an_adapter_launch_is_refused_before_it_starts(store, monkeypatch):
    import importlib.util

    from nbtoolkit.backends import LaunchError

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *rest: None if name == "peft" else real(name, *rest))
    with pytest.raises(LaunchError) as caught:
        launch({"task": "causal-lm", "adapter": {}}, store=store)
    assert (
        str(caught.value)
        == "adapter needs PEFT, which is not installed here; pip install 'nbtoolkit-finetune[adapters]'"
    )
    assert store.list() == []


def test_merge_writes_the_dtype_the_base_was_saved_in_or_the_one_asked(lora_jobs, tmp_path):
    from safetensors import safe_open

    from nbtoolkit.cli import build_parser

    job = lora_jobs["causal-lm"]
    # the bundled base is saved as built: fp32; a dtype goes by the spec's precision name or torch's
    for dtype, stored in ((None, "F32"), ("bf16", "BF16"), ("float16", "F16")):
        out = job.merge(tmp_path / (dtype or "as-saved"), dtype=dtype)
        with safe_open(out / "model.safetensors", "pt") as saved:
            assert {saved.get_slice(name).get_dtype() for name in saved.keys()} == {stored}  # noqa: SIM118  not iterable
    with pytest.raises(LaunchError) as caught:
        job.merge(tmp_path / "half", dtype="half")
    assert str(caught.value) == ("merge dtype 'half' is not one of fp32, bf16, fp16, float32, bfloat16, float16")
    assert build_parser().parse_args(["merge", job.id, "--dtype", "fp16"]).dtype == "fp16"


#: a step that changes nothing (Adam moves each weight by about the learning rate): what a chained run saves is
#: the model it started from, so it can be compared to the earlier job's
STANDING_STILL = {"max_steps": 1, "batch_size": 4, "learning_rate": 1e-30, "logging_steps": 1}


def saved_weights(folder) -> dict:
    """A saved full model's tensors as numpy arrays (no torch in the test process)."""
    from safetensors.numpy import load_file

    (weights,) = list(Path(folder).glob("*.safetensors"))
    return load_file(weights)


def assert_same_weights(got: dict, expected: dict) -> None:
    import numpy as np

    assert got.keys() == expected.keys()
    for name, tensor in expected.items():
        np.testing.assert_allclose(got[name], tensor, rtol=0, atol=1e-12, err_msg=name)


def test_a_run_starts_from_an_earlier_adapter_jobs_model_as_a_full_model_or_a_new_adapter(
    lora_jobs, monkeypatch, capsys
):
    """`model: job:NAME` (one process) and `job:ID` (two ranks of DeepSpeed ZeRO-2 under torchrun, a new adapter)
    start from the earlier job's base with its adapter merged in, and record where their model came from."""
    parent = lora_jobs["causal-lm"]
    store = parent.store
    full = launch(
        {"task": "causal-lm", "name": "chained-full", "model": f"job:{parent.name}", "train": STANDING_STILL},
        store=store,
    )
    adapter = launch(
        {
            "task": "causal-lm",
            "model": f"job:{parent.id}",
            "adapter": {"r": 4},
            "hardware": {"devices": 2},
            "parallelism": {"strategy": "deepspeed", "zero_stage": 2},
            "train": STANDING_STILL,
        },
        store=store,
    )
    assert full.wait(timeout=300) == "succeeded", full.logs(tail=30)
    assert adapter.wait(timeout=300) == "succeeded", adapter.logs(tail=30)
    expected = saved_weights(parent.merge())
    assert_same_weights(saved_weights(full.model()), expected)
    assert_same_weights(saved_weights(adapter.merge()), expected)
    assert (adapter.dir / "ds_config.json").is_file() and "[rank1]:" in adapter.logs()
    # the base merged at load exists nowhere else: its weights are kept beside the new adapter
    assert (adapter.dir / "output" / "model" / "base" / "model.safetensors").is_file()
    assert full.spec.model == str(parent.dir / "output" / "model")
    for child, ref in ((full, f"job:{parent.name}"), (adapter, f"job:{parent.id}")):
        assert child.record.info["model_from"] == parent.id and child.record.info["model_ref"] == ref
    monkeypatch.setenv("NBTOOLKIT_HOME", str(store.home))
    assert cli_main(["show", full.id]) == 0
    assert f"model from: job {parent.id} (job:{parent.name})" in capsys.readouterr().out
