"""The tasks' parts in-process, on the bundled samples: spans, packing, prompts, scores, clear errors."""

from __future__ import annotations

import json

import pytest

from nbtoolkit.lineage.checkpoints import last_checkpoint
from nbtoolkit.spec import load_spec
from nbtoolkit.train.data import load_splits
from nbtoolkit.train.errors import TrainError
from nbtoolkit.train.task_setup import check_task, setup_task


def task_setup(spec: dict):
    """What the training program does before training: check the pairing, load data, set up."""
    spec = load_spec(spec)
    check_task(spec)
    return setup_task(spec, load_splits(spec))


def test_question_answering_features_point_at_the_answer_in_every_window():
    from nbtoolkit.tasks.question_answering.train import setup

    spec = load_spec(
        {
            "task": "question-answering",
            "dataset": {"max_length": 64, "doc_stride": 16, "max_train_samples": 3, "max_eval_samples": 12},
        }
    )
    splits = load_splits(spec)
    features = setup(spec, splits).eval_dataset
    examples = splits["eval"]
    windows = [features["example_id"].count(index) for index in range(len(examples))]
    assert min(windows) > 1, "contexts longer than max_length are split into overlapping windows"
    found = set()
    for feature in features:
        start, end, offsets = feature["start_positions"], feature["end_positions"], feature["offset_mapping"]
        example = examples[feature["example_id"]]
        if start == end == 0:  # the answer is not inside this window
            continue
        assert example["context"][offsets[start][0] : offsets[end][1]] == example["answers"]["text"][0]
        found.add(feature["example_id"])
    assert found == set(range(len(examples)))


def test_question_answering_scores_and_best_span():
    import numpy as np

    from nbtoolkit.tasks.question_answering.train import best_answer, exact_match_and_f1

    assert exact_match_and_f1("The Silver Quill Award.", ["silver quill award"]) == (1.0, 1.0)
    assert exact_match_and_f1("Silver Quill", ["Silver Quill Award"]) == (0.0, 0.8)
    assert exact_match_and_f1("", ["Eastmere"]) == (0.0, 0.0)
    context = "Ada was born in Eastmere in 1955."
    offsets = [None, (0, 3), (4, 7), (8, 12), (13, 15), (16, 24), (25, 27), (28, 32), None]
    start = np.array([9.0, 0, 0, 0, 0, 5, 0, 1, 9.0])  # the best logits sit on tokens outside the context
    end = np.array([9.0, 0, 0, 0, 0, 4, 0, 2, 9.0])
    assert best_answer(context, [(start, end, offsets)]) == "Eastmere"


def test_summarization_prompt_keeps_the_template_whole_and_pads_labels_with_minus_100():
    from nbtoolkit.tasks.summarization.train import prompted, rouge
    from nbtoolkit.train.models import load_tokenizer

    tokenizer = load_tokenizer("nbtoolkit/tiny-t5")
    template = "Summarize the following news article:\n{input}\nSummary:\n"
    article = "The council voted on Monday to build a new footbridge over the river. " * 10
    (text,) = prompted(tokenizer, [article], template, max_length=40)
    assert text.startswith("Summarize the following news article:\nThe council voted") and text.endswith("\nSummary:\n")
    assert len(tokenizer(text)["input_ids"]) <= 40

    setup = task_setup(
        {
            "task": "summarization",
            "dataset": {
                "pad_to_max_length": True,
                "max_target_length": 48,
                "max_train_samples": 8,
                "max_eval_samples": 2,
            },
        }
    )
    labels = setup.train_dataset[0]["labels"]
    assert len(labels) == 48 and labels[-1] == -100 and tokenizer.pad_token_id not in labels
    assert rouge(["Work begins in May."], ["Work begins in May."])["rougeLsum"] == pytest.approx(100.0)  # x100
    assert rouge(["Shares rise."], ["Council votes."])["rouge1"] == 0.0


def test_causal_lm_packs_text_into_equal_blocks_with_labels():
    setup = task_setup({"task": "causal-lm", "dataset": {"max_length": 64}})
    blocks = setup.train_dataset
    assert len(blocks) > 50 and {len(row["input_ids"]) for row in blocks} == {64}
    assert all(row["labels"] == row["input_ids"] for row in blocks)
    tokenizer = setup.tokenizer
    assert tokenizer.decode(blocks[0]["input_ids"]).startswith(" = ")  # wikitext's heading, empty lines dropped


@pytest.mark.parametrize(
    ("task", "dataset", "sentence"),
    [
        (
            "summarization",
            {"summary_column": "summary"},
            "dataset.summary_column 'summary' is not a column of the data; its columns are article, highlights",
        ),
        (
            "question-answering",
            {"context_column": "passage"},
            (
                "dataset.context_column 'passage' is not a column of the data; its columns are id, title, context, question, "
                "answers"
            ),
        ),
        (
            "causal-lm",
            {"text_column": "body"},
            "dataset.text_column 'body' is not a column of the data; its columns are text",
        ),
    ],
)
def test_missing_column_is_one_sentence(task, dataset, sentence):
    with pytest.raises(TrainError) as raised:
        task_setup({"task": task, "dataset": dataset})
    assert str(raised.value) == sentence


def test_hub_dataset_or_model_out_of_reach_is_one_sentence():
    with pytest.raises(TrainError) as raised:
        task_setup({"task": "text-classification", "dataset": {"name": "philschmid/emotion"}})
    assert str(raised.value) == (
        "dataset.name 'philschmid/emotion' could not be loaded (Couldn't reach "
        "'philschmid/emotion' on the Hub (OfflineModeIsEnabled)); check the name, or give "
        "local files in dataset.files"
    )
    with pytest.raises(TrainError, match=r"^model 'google/flan-t5-small' could not be loaded \(We couldn't connect"):
        task_setup({"task": "summarization", "model": "google/flan-t5-small"})


def test_summarization_with_an_encoder_only_model_is_one_sentence():
    with pytest.raises(TrainError) as raised:
        task_setup({"task": "summarization", "model": "nbtoolkit/tiny-bert"})
    assert str(raised.value) == (
        "model 'nbtoolkit/tiny-bert' is a bert encoder-only model, but task 'summarization' needs an encoder-decoder "
        "(sequence-to-sequence) model such as t5, flan-t5 or bart; choose such a model, or leave model empty for the "
        "bundled nbtoolkit/tiny-t5"
    )


def test_resume_latest_takes_the_last_complete_checkpoint(tmp_path):
    from nbtoolkit.train.program import resume_checkpoint

    state = '{"global_step": 1}'
    checkpoints = {  # step -> (trainer_state.json, files beside it); from 30 on each is cut off or broken
        10: (state, ["pytorch_model.bin"]),
        20: (state, ["model-1.safetensors", "model-2.safetensors"]),
        30: (None, ["model.safetensors"]),
        40: ('{"global_st', ["model.safetensors"]),
        50: ("null", ["model.safetensors"]),
        60: (state, []),
        70: (state, ["model-1.safetensors"]),
        80: ('{"log_history": []}', ["model.safetensors"]),
    }
    for step, (text, files) in checkpoints.items():
        folder = tmp_path / f"checkpoint-{step}"
        folder.mkdir()
        if text is not None:
            (folder / "trainer_state.json").write_text(text)
        for name in files:
            (folder / name).write_bytes(b"weights")
        if step in (20, 70):  # sharded: the index names two shards, 70 lacks one
            (folder / "model.safetensors.index.json").write_text(
                json.dumps({"weight_map": {"a": "model-1.safetensors", "b": "model-2.safetensors"}})
            )
    (tmp_path / "model").mkdir()
    assert last_checkpoint(tmp_path) == tmp_path / "checkpoint-20"
    assert resume_checkpoint(load_spec({"task": "causal-lm", "resume": "latest"}), str(tmp_path)) == str(
        tmp_path / "checkpoint-20"
    )
    assert resume_checkpoint(load_spec({"task": "causal-lm", "resume": "latest"}), str(tmp_path / "none")) is None
    with pytest.raises(TrainError, match="is not a complete checkpoint"):
        resume_checkpoint(load_spec({"task": "causal-lm", "resume": str(tmp_path / "checkpoint-30")}), str(tmp_path))
    for step, weights in ((90, "adapter_model.safetensors"), (100, "global_step100")):  # PEFT, DeepSpeed ZeRO
        folder = tmp_path / f"checkpoint-{step}"
        folder.mkdir()
        if step == 90:
            (folder / weights).write_bytes(b"weights")
        else:
            (folder / weights).mkdir()
        (folder / "trainer_state.json").write_text(state)
        assert last_checkpoint(tmp_path) == folder


def test_bundled_tiny_models_use_their_tokenizers_special_tokens():
    from nbtoolkit.train.models import load_tokenizer, model_config

    t5, gpt2 = model_config("nbtoolkit/tiny-t5"), model_config("nbtoolkit/tiny-gpt2")
    t5_tokens = load_tokenizer("nbtoolkit/tiny-t5")
    assert (t5.pad_token_id, t5.eos_token_id, t5.decoder_start_token_id) == (
        t5_tokens.pad_token_id,
        t5_tokens.eos_token_id,
        t5_tokens.pad_token_id,
    )
    assert t5_tokens("a b")["input_ids"][-1] == t5_tokens.eos_token_id
    assert gpt2.eos_token_id == gpt2.bos_token_id == load_tokenizer("nbtoolkit/tiny-gpt2").eos_token_id
    assert json.loads(json.dumps(t5.to_dict()))["model_type"] == "t5"
