"""One task registry: the spec, the training program, the pairing check and the form read the same entries."""

from __future__ import annotations

import importlib
import typing

import pytest

from nbtoolkit.notebook.spec_fields import choices
from nbtoolkit.spec import DatasetSpec, RunSpec
from nbtoolkit.tasks import TASK_NAMES, TASKS
from nbtoolkit.train.models import model_config
from nbtoolkit.train.pairing import has_head


def test_the_spec_and_the_form_offer_exactly_the_registered_tasks():
    assert typing.get_args(RunSpec.model_fields["task"].annotation) == TASK_NAMES
    assert choices("task") == TASK_NAMES


@pytest.mark.parametrize("name", TASK_NAMES)
def test_each_task_names_real_columns_a_program_and_a_bundled_model_that_suits_it(name):
    task = TASKS[name]
    assert set(task.columns) <= set(DatasetSpec.model_fields)
    assert callable(importlib.import_module(task.program).setup)
    assert RunSpec(task=name).model_name == task.bundled_model
    assert has_head(task.head, model_config(task.bundled_model))


@pytest.mark.parametrize(
    "name, other",
    [("summarization", "causal-lm"), ("causal-lm", "summarization"), ("summarization", "question-answering")],
)
def test_a_bundled_model_of_another_head_does_not_suit(name, other):
    assert not has_head(TASKS[name].head, model_config(TASKS[other].bundled_model))
