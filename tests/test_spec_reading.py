"""How a spec is read, the same everywhere: YAML 1.2 booleans (only true/false) in files, %%finetune
bodies and --set values; an image URI with one placeholder, substituted alike by submit and the export;
job ids matched whole (no trailing newline)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nbtoolkit.backends.sagemaker.export import v3_script
from nbtoolkit.backends.sagemaker.job import training_job
from nbtoolkit.backends.sagemaker.submit import image_uri
from nbtoolkit.runner.store import JOB_ID, JOB_ID_PREFIX, JobNotFound
from nbtoolkit.spec import SpecError, load_spec

SCRIPT_SPEC = """\
task: causal-lm
script: {path: train.py, args: [--save_strategy, no, --push, yes, --fast, on, --slow, off, --eval, true]}
extra: {save_on_each_node: no}
"""
YAML_1_1_WORDS = ["--save_strategy", "no", "--push", "yes", "--fast", "on", "--slow", "off", "--eval", "true"]


def test_a_spec_file_reads_only_true_and_false_as_booleans(tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_text(SCRIPT_SPEC)
    spec = load_spec(path)
    assert spec.script.args == YAML_1_1_WORDS and spec.extra == {"save_on_each_node": "no"}
    assert load_spec("task: causal-lm\ndataset: {pad_to_max_length: true}").dataset.pad_to_max_length is True


#: every word YAML 1.1 reads as a boolean (and 1.2 as text), beside words no version reads as one
YAML_1_1_BOOLEANS = [
    f(word) for word in ("y", "yes", "n", "no", "on", "off") for f in (str.lower, str.upper, str.capitalize)
]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from([*YAML_1_1_BOOLEANS, "--flag", "value", "12", "true", "false"]), max_size=8))
def test_script_args_written_plainly_reach_the_script_as_written(words):
    spec = load_spec(f"task: causal-lm\nscript: {{path: train.py, args: [{', '.join(words)}]}}\n")
    assert spec.script.args == words  # true/false are booleans, and become the text they were
    assert load_spec(spec.to_yaml()).script.args == words  # and a spec written back reads the same


def test_a_finetune_body_and_its_set_values_read_booleans_as_files_do(shell):
    preview = shell.run_cell_magic("finetune", "--dry-run --set extra.fp16_full_eval=off", SCRIPT_SPEC)
    assert preview.spec.script.args == YAML_1_1_WORDS
    assert preview.spec.extra == {"save_on_each_node": "no", "fp16_full_eval": "off"}


SAGEMAKER = {
    "task": "text-classification",
    "hardware": {"target": "sagemaker", "instance_type": "ml.g5.xlarge"},
    "sagemaker": {"role": "arn:aws:iam::111122223333:role/sm", "region": "us-east-1"},
}


def test_an_image_uri_with_another_brace_is_one_sentence_at_load():
    with pytest.raises(SpecError) as raised:
        load_spec({**SAGEMAKER, "sagemaker": {**SAGEMAKER["sagemaker"], "image_uri": "1.dkr.ecr.{region}.x/y:{tag}"}})
    assert str(raised.value) == (
        "sagemaker.image_uri '1.dkr.ecr.{region}.x/y:{tag}' holds a brace other than {region}; an image URI may "
        "name the job's region as {region} and has no other placeholder"
    )


def test_submit_and_the_exported_script_put_the_region_into_the_image_alike():
    uri = "111122223333.dkr.ecr.{region}.amazonaws.com/my-training:2.7-{region}"
    job = training_job(load_spec({**SAGEMAKER, "sagemaker": {**SAGEMAKER["sagemaker"], "image_uri": uri}}))
    line = next(line for line in v3_script(job, "t").splitlines() if line.startswith("training_image = "))
    scope = {"boto_session": SimpleNamespace(region_name="eu-west-1")}
    exec(line, scope)  # the exported script's own line, run as the script runs it
    expected = "111122223333.dkr.ecr.eu-west-1.amazonaws.com/my-training:2.7-eu-west-1"
    assert scope["training_image"] == image_uri(job, "eu-west-1") == expected


@pytest.mark.parametrize("pattern", [JOB_ID, JOB_ID_PREFIX])
def test_a_job_id_with_a_trailing_newline_is_no_job_id(pattern):
    assert pattern.match("3f9a0c1d") and not pattern.match("3f9a0c1d\n")


def test_the_store_refuses_an_id_with_a_trailing_newline(store):
    record = store.create(name="x", task="text-classification", backend="local")
    for look_up in (store.job_dir, store.get):
        with pytest.raises(JobNotFound, match="is not a job id"):
            look_up(record.id + "\n")


def test_yaml_1_1_number_forms_reach_the_script_as_written():
    """Leading-zero octal, base 60, 0b and underscores are YAML 1.1 numbers (`--seed 010` reached the script as
    8, `1:30` as 90); read per YAML 1.2's core schema they stay the text they were."""
    words = [
        "--seed",
        "010",
        "--max_time",
        "1:30",
        "--mask",
        "0b101",
        "--rows",
        "1_000",
        "--lr",
        "1e-5",
        "--s",
        "1:30.5",
    ]
    spec = load_spec(f"task: causal-lm\nscript: {{path: train.py, args: [{', '.join(words)}]}}\n")
    assert spec.script.args == words
    numbers = load_spec("task: causal-lm\nextra: {a: 12, b: -3, c: 0o17, d: 0x1f, e: 2.5}").extra
    assert numbers == {"a": 12, "b": -3, "c": 15, "d": 31, "e": 2.5}
    with pytest.raises(SpecError, match=r"^extra.f: inf holds a number that is not finite"):  # `.inf` is a number
        load_spec("task: causal-lm\nextra: {f: .inf}")


def test_an_extra_number_written_without_its_dot_reaches_the_trainer_as_a_number():
    """`1e-4` stays text in a spec (above); TrainingArguments would keep the text and the optimizer fail on it."""
    from nbtoolkit.train.program import training_arguments

    extra = {
        "adam_beta2": "1e-4",
        "adam_epsilon": 1.0e-8,
        "eval_accumulation_steps": "3",
        "lr_scheduler_type": "cosine",
    }
    spec = load_spec("task: causal-lm\nextra: {adam_beta2: 1e-4, adam_epsilon: 1.0e-8, eval_accumulation_steps: '3'}")
    assert {key: spec.extra[key] for key in ("adam_beta2", "eval_accumulation_steps")} == {
        "adam_beta2": "1e-4",
        "eval_accumulation_steps": "3",
    }
    args = training_arguments(load_spec({"task": "causal-lm", "extra": extra}), "unused", has_eval=False)
    assert (args.adam_beta2, args.adam_epsilon, args.eval_accumulation_steps) == (1e-4, 1e-8, 3)
    assert args.lr_scheduler_type == "cosine"


def test_only_plain_numbers_for_fields_declared_numbers_are_read_as_numbers():
    """By the field's declared type (warmup_steps is a float whose default is 0), and only as a person writes a
    number: `1_000`, `nan` and other scripts' digits stay text, as the spec's YAML keeps them."""
    from transformers import TrainingArguments

    from nbtoolkit.train.program import numbers_where_the_trainer_takes_them

    given = {
        "warmup_steps": "1e-1",
        "neftune_noise_alpha": "5e0",  # float | None
        "torch_empty_cache_steps": "1e2",  # int | None: an exponent is no integer
        "max_steps": "10",
        "seed": "1_000",
        "weight_decay": "nan",
        "learning_rate": "٤٢",
        "lr_scheduler_type": "cosine",
        "report_to": "1",  # a text field keeps its text
    }
    assert numbers_where_the_trainer_takes_them(TrainingArguments, given) == {
        **given,
        "warmup_steps": 0.1,
        "neftune_noise_alpha": 5.0,
        "max_steps": 10,
    }
