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
    assert {*task.columns, *task.dataset_fields} <= set(DatasetSpec.model_fields)
    assert callable(importlib.import_module(task.program).setup)
    assert RunSpec(task=name).model_name == task.bundled_model
    assert has_head(task.head, model_config(task.bundled_model))


@pytest.mark.parametrize(
    "name, other",
    [("summarization", "causal-lm"), ("causal-lm", "summarization"), ("summarization", "question-answering")],
)
def test_a_bundled_model_of_another_head_does_not_suit(name, other):
    assert not has_head(TASKS[name].head, model_config(TASKS[other].bundled_model))


@pytest.mark.parametrize("name", TASK_NAMES)
def test_each_task_states_facts_the_libraries_know(name):
    """Its auto class is transformers', its adapter task type PEFT's, its pipeline tag a Hub task (the Hub's
    InferenceClient has a method per task), and its answer a function that exists: what push, adapters and predict
    look up by the task."""
    import peft
    import transformers
    from huggingface_hub import InferenceClient

    task = TASKS[name]
    assert isinstance(getattr(transformers, task.auto_model), type)
    assert task.peft_task_type in peft.TaskType.__members__
    # an image-text-to-text model is served as a conversation (huggingface_hub/inference/_providers/hf_inference.py:188-191)
    conversational = {"image-text-to-text": "chat_completion"}
    assert callable(
        getattr(InferenceClient, conversational.get(task.pipeline_tag, task.pipeline_tag.replace("-", "_")))
    )
    module, _, function = task.answer.partition(":")
    assert callable(getattr(importlib.import_module(module), function))


def test_a_task_missing_a_fact_is_refused_as_it_registers_in_one_sentence():
    from dataclasses import replace

    from nbtoolkit.tasks import TaskError, registry

    complete = replace(TASKS["causal-lm"], sample_data="causal-lm")  # a task of another name: causal-lm's sample
    assert registry([replace(complete, name="poem")])["poem"].prompt == complete.prompt
    with pytest.raises(TaskError) as missing:
        registry([replace(complete, name="poem", pipeline_tag="")])
    assert str(missing.value) == (
        "task 'poem' has no pipeline_tag (the Hub's pipeline tag for its model card); add it where the task is defined"
    )
    with pytest.raises(TaskError, match=r"^task 'poem': answer 'continue_text' is not a module:function$"):
        registry([replace(complete, name="poem", answer="continue_text")])


def test_every_task_nbtoolkit_registers_in_its_pyproject_loads():
    """A task of nbtoolkit's own that failed to load would be left out with a warning only: the suite says so."""
    from pathlib import Path

    import tomllib

    from nbtoolkit.tasks import ENTRY_POINT_GROUP

    pyproject = tomllib.loads((Path(__file__).resolve().parent.parent / "pyproject.toml").read_text())
    own = pyproject["project"]["entry-points"][ENTRY_POINT_GROUP]
    assert [name for name in own if name not in TASK_NAMES] == [], "not loaded (or the install is older: make install)"
    assert [TASKS[name].program for name in own] == [f"{own[name].split(':')[0]}.train" for name in own]


def test_a_task_bringing_its_own_sample_and_tiny_model_is_refused_without_their_files(tmp_path):
    """vision-chat's folder holds both; a copy pointing at an empty folder is refused as it registers."""
    from dataclasses import replace

    from nbtoolkit.tasks import TaskError, registry

    own = TASKS["vision-chat"]
    assert own.assets is not None and own.tiny_model is not None
    assert registry([replace(own, name="look")])["look"].tiny_model == own.tiny_model
    with pytest.raises(TaskError, match=r"^task 'look': its assets folder .+ has no data/\*\.jsonl \(the sample"):
        registry([replace(own, name="look", assets=tmp_path)])
    with pytest.raises(TaskError, match=r"^task 'look': its tiny model's tokenizer folder .+ has no tokenizer\.json"):
        registry([replace(own, name="look", tiny_model=own.tiny_model._replace(tokenizer=tmp_path))])


def test_each_tasks_own_assets_ship_in_the_wheel(tmp_path):
    """The wheel takes every file of the package (pyproject.toml: packages = ["nbtoolkit"]), so a task's folder
    carries its sample and tiny model to an install; built here without the panel's build hook (0.5 s)."""
    import os
    import subprocess
    import zipfile
    from pathlib import Path

    from tests.conftest import PYTHON

    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "HATCH_BUILD_NO_HOOKS": "true"}
    built = subprocess.run(
        [PYTHON, "-m", "hatchling", "build", "-t", "wheel", "-d", str(tmp_path)],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert built.returncode == 0, built.stderr
    (wheel,) = tmp_path.glob("*.whl")
    shipped = set(zipfile.ZipFile(wheel).namelist())
    owned = [task.assets for task in TASKS.values() if task.assets is not None]
    assert owned, "no task brings assets of its own: vision-chat does"
    files = {str(path.relative_to(root)) for folder in owned for path in folder.rglob("*") if path.is_file()}
    assert {"nbtoolkit/tasks/vision_chat/assets/processor/tokenizer.json"} <= files
    assert files - shipped == set()


def test_a_task_the_data_preview_cannot_measure_is_refused_unless_trl_templates_it():
    from dataclasses import replace

    from nbtoolkit.tasks import TaskError, registry

    with pytest.raises(TaskError, match=r"^task 'poem' has no preview_lengths \(the module:function that measures"):
        registry([replace(TASKS["causal-lm"], name="poem", preview_lengths="")])
    assert registry([replace(TASKS["chat"], name="talk", sample_data="chat", preview_lengths="")])["talk"].trl


@pytest.mark.parametrize(
    "wrong, said",
    [
        ({"block": "nonexistent"}, "block 'nonexistent' is not a block of the spec; a task may read one of preference"),
        ({"program": "nbtoolkit.tasks.causal_lm.trian"}, "program 'nbtoolkit.tasks.causal_lm.trian' names the module"),
        ({"answer": "poems_nbtoolkit.answer:verse"}, "answer 'poems_nbtoolkit.answer:verse' names the module poems_"),
        ({"check_row": "not a hook"}, "check_row 'not a hook' is not a module:function"),
        ({"head": "token-classification"}, "head 'token-classification' is not one of sequence-classification, "),
        ({"try_it": "voice"}, "try_it 'voice' is not one of text, question-and-context, chat, chat-with-images"),
        ({"sequences_per_sample": 0}, "sequences_per_sample 0 is not a whole number of at least 1"),
        ({"preview_note": "{oops}"}, "preview_note names {oops}, but it is formatted with data alone"),
        ({"preview_note": "a {brace"}, "preview_note is no format string"),
        ({"requires": ("torch<<0 !!",)}, "requires 'torch<<0 !!' is not a pip requirement (PEP 508)"),
        ({"sample_data": "poems"}, "sample_data 'poems' is no sample of nbtoolkit's (the one it trains on when"),
    ],
)
def test_a_task_stating_a_fact_wrongly_is_refused_as_it_registers_in_one_sentence(wrong, said):
    """Each of these passed registration and failed later, in every spec (block) or in a traceback of its own."""
    from dataclasses import replace

    from nbtoolkit.tasks import TaskError, registry

    with pytest.raises(TaskError) as refused:
        registry([replace(TASKS["causal-lm"], name="poem", **{"sample_data": "causal-lm", **wrong})])
    assert str(refused.value).startswith(f"task 'poem': {said}")
    assert "\n" not in str(refused.value)


def test_the_blocks_a_task_may_read_alone_are_the_specs_own():
    """The registry cannot import the spec (it imports the registry): its list of task blocks is held here."""
    from nbtoolkit.spec import RunSpecCore
    from nbtoolkit.tasks import TASK_BLOCKS

    assert set(TASK_BLOCKS) == {task.block for task in TASKS.values() if task.block}
    assert set(TASK_BLOCKS) <= set(RunSpecCore.model_fields)
