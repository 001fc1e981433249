"""The spec's fields by dotted name: types, choices and defaults come from the model itself."""

from __future__ import annotations

import pytest

from nbtoolkit.notebook.spec_fields import (
    choices,
    default,
    get_value,
    named_fields,
    optional,
    remove_value,
    set_value,
    value_type,
)
from nbtoolkit.spec import SpecError, load_spec


def test_choices_defaults_and_types_come_from_the_spec_model():
    assert choices("precision") == ("fp32", "bf16", "fp16")
    assert choices("parallelism.zero_stage") == (0, 1, 2, 3)  # a small int range (ge=0, le=3)
    assert choices("hardware.devices") == ()  # 1..1024 is no dropdown
    assert default("train.batch_size") == 8 and default("sagemaker.max_run") == 24 * 3600
    assert value_type("train.learning_rate") is float and not optional("train.learning_rate")
    assert value_type("train.max_steps") is int and optional("train.max_steps")
    assert value_type("dataset.files.train") is str and optional("dataset.files.train")
    with pytest.raises(KeyError):
        default("train.no_such_field")


def test_a_nested_dict_edited_by_dotted_names():
    data: dict = {"task": "summarization"}
    set_value(data, "dataset.files.train", "a.jsonl")
    set_value(data, "train.max_steps", 5)
    assert data == {"task": "summarization", "dataset": {"files": {"train": "a.jsonl"}}, "train": {"max_steps": 5}}
    assert get_value(data, "dataset.files.train") == "a.jsonl" and get_value(data, "train.seed", "none") == "none"
    remove_value(data, "dataset.files.train")
    remove_value(data, "hardware.devices")  # absent: nothing happens
    assert data == {"task": "summarization", "train": {"max_steps": 5}}  # emptied blocks go too


def sentence(data: dict) -> str:
    with pytest.raises(SpecError) as caught:
        load_spec(data)
    return str(caught.value)


@pytest.mark.parametrize(
    ("data", "culprit"),
    [
        (
            {"task": "causal-lm", "parallelism": {"strategy": "deepspeed", "zero_stage": 1, "offload_params": "cpu"}},
            "parallelism.offload_params",
        ),
        ({"task": "causal-lm", "precision": "fp16"}, "precision"),
        ({"task": "causal-lm", "launcher": "local", "hardware": {"devices": 2}}, "launcher"),
        ({"task": "causal-lm", "parallelism": {"strategy": "ddp"}, "launcher": "local"}, "parallelism.strategy"),
        ({"task": "causal-lm", "dataset": {"files": {"validation": "v.jsonl"}}}, "dataset.files.train"),
        ({"task": "causal-lm", "train": {"batch_size": 0}}, "train.batch_size"),
    ],
)
def test_a_spec_error_names_its_field_first(data, culprit):
    paths = [
        "task",
        "precision",
        "launcher",
        "parallelism.strategy",
        "parallelism.zero_stage",
        "parallelism.offload_params",
        "hardware.devices",
        "dataset.files.train",
        "dataset.files.validation",
        "train.batch_size",
    ]
    assert named_fields(sentence(data), paths)[0] == culprit
