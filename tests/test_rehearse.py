"""Rehearsal: a real spec's launch run here on a tiny model of the same architecture, before it costs money."""

from __future__ import annotations

import pytest

from nbtoolkit.cli import main
from nbtoolkit.rehearsal.rehearse import RehearsalError, rehearsal
from nbtoolkit.spec import load_spec

#: the FLAN-T5 XXL tutorial's run (seed 003), its columns named as a user's own data might name them
FLAN_T5 = {
    "name": "flan-t5-xxl",
    "task": "summarization",
    "model": "google/flan-t5-xxl",
    "precision": "bf16",
    "launcher": "deepspeed",
    "dataset": {
        "name": "cnn_dailymail",
        "config": "3.0.0",
        "text_column": "document",
        "summary_column": "summary",
        "max_length": 500,
        "max_target_length": 129,
        "prompt_template": "Summarize the following news article:\n{input}\nSummary:\n",
    },
    "hardware": {"instance_type": "p4d.24xlarge"},
    "parallelism": {"strategy": "deepspeed", "zero_stage": 3},
    "train": {"epochs": 3, "batch_size": 8, "learning_rate": 1e-4, "gradient_checkpointing": True},
}


def test_the_rehearsal_keeps_the_launch_and_scales_the_model_down():
    plan = rehearsal(FLAN_T5)
    (spec,) = plan.specs
    assert plan.real_ranks == plan.ranks == 8 and plan.notes[0].startswith("the hub dataset cnn_dailymail is not read")
    assert spec["hardware"] | {"master_port": None} == {
        "target": "local",
        "accelerator": "cpu",
        "devices": 8,
        "nodes": 1,
        "master_addr": "127.0.0.1",
        "master_port": None,
        "node_rank": 0,
    }
    assert (spec["launcher"], spec["precision"], spec["parallelism"]["zero_stage"]) == ("deepspeed", "bf16", 3)
    assert spec["dataset"]["prompt_template"] == FLAN_T5["dataset"]["prompt_template"]
    assert (spec["dataset"]["max_length"], spec["dataset"]["max_target_length"]) == (500, 129)
    assert spec["train"]["gradient_checkpointing"] and spec["train"]["max_steps"] == spec["train"]["save_steps"]
    assert plan.model_type == "t5" and plan.model_config["feed_forward_proj"] == "gated-gelu"
    assert plan.model_config["d_model"] < 4096 and plan.model_config["tie_word_embeddings"] is False
    assert set(plan.samples["train"][0]) == {"document", "summary"} and set(plan.samples) == {"train", "validation"}


def test_a_wider_run_is_rehearsed_narrower_in_the_same_shape():
    trainium = {
        "task": "summarization",
        "model": "t5-large",
        "precision": "bf16",
        "compile": "neuron",
        "hardware": {"accelerator": "neuron", "instance_type": "trn1.32xlarge", "nodes": 4},
        "parallelism": {"strategy": "xla"},
        "neuron": {"precompile": True},
    }
    plan = rehearsal(trainium)
    assert len(plan.specs) == 4 and [spec["hardware"]["node_rank"] for spec in plan.specs] == [0, 1, 2, 3]
    assert {spec["hardware"]["devices"] for spec in plan.specs} == {2} and plan.real_ranks == 128
    assert len({spec["hardware"]["master_port"] for spec in plan.specs}) == 1
    assert plan.specs[0]["parallelism"]["strategy"] == "ddp" and plan.specs[0]["compile"] == "none"
    assert "neuron" not in plan.specs[0] and load_spec(plan.specs[0]).world_size == 8
    assert any("rehearsed as 4 node(s) x 2" in note for note in plan.notes)
    assert any("Neuron compiler" in note for note in plan.notes)


def test_a_large_batch_and_accumulation_are_rehearsed_smaller_and_said():
    plan = rehearsal({"task": "summarization", "model": "t5-small", "train": {"batch_size": 32, "grad_accum": 32}})
    assert (plan.specs[0]["train"]["batch_size"], plan.specs[0]["train"]["grad_accum"]) == (8, 2)
    assert any("gradient accumulation 32 is rehearsed as 2" in note for note in plan.notes)
    assert rehearsal({"task": "summarization", "model": "t5-small", "train": {"grad_accum": 2}}).notes == [
        note for note in plan.notes if "accumulation" not in note
    ]
    assert plan.specs[0]["extra"]["generation_max_length"] == 16  # the default max_target_length is longer
    assert any("evaluation generates 16 tokens, not 64" in note for note in plan.notes)


@pytest.mark.parametrize(
    ("given", "generates", "length"),
    [
        ({"extra": {"generation_max_length": None}}, True, 16),  # HF's own default: the target length then
        ({"extra": {"generation_max_length": 8}}, True, 8),
        ({"extra": {"generation_max_length": "64"}}, True, "64"),  # not a number: left to the Trainer to refuse
        ({"train": {"predict_with_generate": False}}, False, None),
        ({"hardware": {"accelerator": "neuron", "instance_type": "trn1.2xlarge"}}, False, None),  # as on Neuron
    ],
)
def test_a_rehearsal_generates_only_as_the_real_run_does_and_at_most_16_tokens(given, generates, length):
    spec = {"task": "summarization", "model": "t5-small", "train": {}, **given}
    plan = rehearsal(spec)
    assert plan.specs[0]["train"]["predict_with_generate"] is generates
    assert plan.specs[0]["extra"].get("generation_max_length") == length
    assert any(note.startswith("evaluation generates 16 tokens") for note in plan.notes) == (length == 16)


def test_a_sagemaker_job_is_rehearsed_as_its_instances_on_loopback():
    smddp = {
        "task": "question-answering",
        "model": "bert-large-uncased",
        "hardware": {"target": "sagemaker", "instance_type": "ml.p4d.24xlarge", "nodes": 2},
        "parallelism": {"strategy": "smddp"},
        "sagemaker": {
            "role": "arn:aws:iam::111122223333:role/sm",
            "image_uri": "111122223333.dkr.ecr.us-east-1.amazonaws.com/hf-smddp:4.46",
        },
    }
    plan = rehearsal(smddp)
    assert [(spec["hardware"]["nodes"], spec["hardware"]["devices"]) for spec in plan.specs] == [(2, 4), (2, 4)]
    assert plan.specs[0]["parallelism"]["strategy"] == "ddp" and "sagemaker" not in plan.specs[0]
    assert plan.model_type == "bert" and plan.tokenizer_of == "nbtoolkit/tiny-bert"


def test_a_spec_with_its_own_script_is_refused_in_one_sentence():
    with pytest.raises(RehearsalError, match=r"^a spec with script: cannot be rehearsed yet"):
        rehearsal({"task": "text-classification", "script": {"path": "train.py"}})


def test_a_broken_rehearsal_names_the_stage_and_the_reason(store, tmp_path, capsys, monkeypatch):
    """A T5 asked to do causal-lm: the rehearsal fails where the real run would, before any money is spent."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "spec.yaml").write_text("task: causal-lm\nmodel: google/flan-t5-xxl\ndataset: {max_length: 32}\n")
    assert main(["rehearse", "spec.yaml", "--max-ranks", "1"]) == 1
    out = capsys.readouterr().out
    assert "FAILED" in out and "stage train: failed: model '" in out
    assert "is a t5 encoder-decoder model, but task 'causal-lm' needs a decoder-only language model" in out


def test_two_ranks_of_a_multi_node_run_are_two_nodes():
    spec = {"task": "causal-lm", "hardware": {"accelerator": "cuda", "instance_type": "g5.12xlarge", "nodes": 2}}
    assert [(s["hardware"]["nodes"], s["hardware"]["devices"]) for s in rehearsal(spec, max_ranks=2).specs] == [
        (2, 1),
        (2, 1),
    ]


def test_a_grpo_rehearsal_loads_no_real_reward_model_and_says_what_scores_instead():
    base = {
        "task": "grpo",
        "model": "nbtoolkit/tiny-chat",
        "reward": {"num_generations": 4},
        "train": {"batch_size": 4},
    }
    alone = rehearsal({**base, "reward": {**base["reward"], "models": ["org/reward-7b"]}})
    assert alone.specs[0]["reward"]["functions"] == ["nbtoolkit.rewards:number_reply"]
    assert alone.specs[0]["reward"]["models"] == []
    assert "reward.models (org/reward-7b) are not loaded in a rehearsal: nbtoolkit.rewards:number_reply" in " ".join(
        alone.notes
    )
    functions = {"functions": ["nbtoolkit.rewards:correct_answer"], "models": ["org/reward-7b"], "weights": [1, 2]}
    both = rehearsal({**base, "reward": {**base["reward"], **functions}})
    assert both.specs[0]["reward"]["functions"] == ["nbtoolkit.rewards:correct_answer"]
    assert both.specs[0]["reward"]["weights"] == [1.0]
    load_spec(both.specs[0])  # a spec the rehearsal can launch: one weight per reward left
