"""The %finetune family in a real IPython shell: flags -> spec, %%finetune, --dry-run, --form, %jobs, stop."""

from __future__ import annotations

import argparse
import re

import pytest
from IPython.core.error import UsageError

from nbtoolkit.notebook.form import SpecForm
from nbtoolkit.notebook.magics import FinetuneMagics
from nbtoolkit.notebook.preview import Preview
from nbtoolkit.spec import SpecError, load_spec
from tests.conftest import SCRIPTS
from tests.test_jobs import wait_for


def dry_run(shell, line: str, cell: str | None = None):
    if cell is None:
        return shell.run_line_magic("finetune", f"--dry-run {line}").spec
    return shell.run_cell_magic("finetune", f"--dry-run {line}", cell).spec


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (
            "--task causal-lm --steps 7 --lr 0.001 --batch-size 4",
            {"task": "causal-lm", "train": {"max_steps": 7, "batch_size": 4, "learning_rate": 0.001}},
        ),
        (
            "--task summarization --zero 3 --offload all --bf16 --nproc 2",
            {
                "task": "summarization",
                "hardware": {"devices": 2},
                "precision": "bf16",
                "parallelism": {
                    "strategy": "deepspeed",
                    "zero_stage": 3,
                    "offload_optimizer": "cpu",
                    "offload_params": "cpu",
                },
            },
        ),
        (
            "--task text-classification --dataset data/train.jsonl --eval-file data/val.jsonl --text-column sentence",
            {
                "task": "text-classification",
                "dataset": {
                    "files": {"train": "data/train.jsonl", "validation": "data/val.jsonl"},
                    "text_column": "sentence",
                },
            },
        ),
        (
            "--task text-classification --dataset philschmid/emotion --label-column label --launcher torchrun --nodes 2",
            {
                "task": "text-classification",
                "dataset": {"name": "philschmid/emotion", "label_column": "label"},
                "hardware": {"nodes": 2},
                "launcher": "torchrun",
            },
        ),
        ("--task causal-lm --lora 16", {"task": "causal-lm", "adapter": {"r": 16}}),
        (
            "--task causal-lm --budget-usd 12.5 --set hardware.hourly_price_usd=2",
            {"task": "causal-lm", "hardware": {"hourly_price_usd": 2.0}, "train": {"budget_usd": 12.5}},
        ),
        (
            "--task causal-lm --compile --set dataset.pad_to_max_length=true --set extra.lr_scheduler_type=cosine",
            {
                "task": "causal-lm",
                "compile": "torch",
                "dataset": {"pad_to_max_length": True},
                "extra": {"lr_scheduler_type": "cosine"},
            },
        ),
        (
            (
                "--task question-answering --target sagemaker --instance-type ml.g5.2xlarge --strategy ddp "
                "--role arn:aws:iam::111122223333:role/sm --spot"
            ),
            {
                "task": "question-answering",
                "hardware": {
                    "target": "sagemaker",
                    "accelerator": "cuda",
                    "devices": 1,
                    "instance_type": "ml.g5.2xlarge",
                },
                "parallelism": {"strategy": "ddp"},
                "sagemaker": {"role": "arn:aws:iam::111122223333:role/sm", "spot": True},
            },
        ),
    ],
)
def test_flags_map_onto_the_spec(shell, line, expected):
    assert dry_run(shell, line).to_dict() == expected


def test_cell_body_is_the_spec_and_flags_override_it(shell, tmp_path):
    body = "name: body\ntask: summarization\ntrain: {max_steps: 3, learning_rate: 0.1, seed: 7}\n"
    spec = dry_run(shell, "--lr 0.01 --name flags", body)
    assert spec.to_dict() == {
        "name": "flags",
        "task": "summarization",
        "train": {"max_steps": 3, "learning_rate": 0.01, "seed": 7},
    }
    # --spec FILE is the base; the cell body and then the flags go on top of it
    (tmp_path / "base.yaml").write_text("task: causal-lm\ntrain: {batch_size: 2, seed: 1}\nprecision: bf16\n")
    spec = dry_run(shell, f"--spec {tmp_path / 'base.yaml'} --seed 3", "train: {max_steps: 9}\n")
    assert spec.to_dict() == {
        "task": "causal-lm",
        "precision": "bf16",
        "train": {"max_steps": 9, "batch_size": 2, "seed": 3},
    }


@pytest.mark.parametrize(
    ("line", "cell", "source"),
    [
        (
            "--task causal-lm --zero 1 --offload all",
            None,
            {
                "task": "causal-lm",
                "parallelism": {
                    "strategy": "deepspeed",
                    "zero_stage": 1,
                    "offload_optimizer": "cpu",
                    "offload_params": "cpu",
                },
            },
        ),
        ("--steps 5", None, {"train": {"max_steps": 5}}),
        ("", "task: causal-lm\ntrain: [1, 2\n", "task: causal-lm\ntrain: [1, 2\n"),
        ("", "- just\n- a list\n", "- just\n- a list\n"),
    ],
)
def test_a_bad_spec_shows_the_sentence_every_front_shows(shell, line, cell, source):
    with pytest.raises(SpecError) as expected:
        load_spec(source)
    with pytest.raises(UsageError, match=f"^{re.escape(str(expected.value))}$"):
        dry_run(shell, line, cell)


def test_finetune_help_documents_every_flag():
    doc = FinetuneMagics.finetune.__doc__
    parser = FinetuneMagics.finetune.parser
    flags = [
        action for action in parser._actions if action.option_strings and not isinstance(action, argparse._HelpAction)
    ]
    assert len(flags) >= 35
    for action in flags:
        assert action.help, f"{action.option_strings[0]} has no help"
        assert action.option_strings[0] in doc
    for named in (
        "--model",
        "--task",
        "--dataset",
        "--launcher",
        "--nproc",
        "--nodes",
        "--zero",
        "--offload",
        "--bf16",
        "--compile",
        "--steps",
        "--spec",
        "--dry-run",
        "--form",
    ):
        assert f"  {named}" in doc


def test_dry_run_shows_the_command_files_and_checks_and_starts_nothing(shell, store):
    preview = shell.run_line_magic("finetune", "--dry-run --task text-classification --steps 5")
    assert isinstance(preview, Preview) and store.list() == []
    assert preview.command.startswith("#!/usr/bin/env bash")
    assert "-m nbtoolkit.train --spec spec.json" in preview.command
    assert load_spec(preview.files["spec.json"]) == preview.spec
    # the planner's size, memory, time and cost lines, then whether this machine can start it
    assert preview.checks[0].startswith("nbtoolkit/tiny-bert: 0.1M parameters")
    assert any(line.startswith("memory per device:") for line in preview.checks)
    assert preview.checks[-1] == "this machine can start it (local launcher)"
    html = preview._repr_html_()
    assert all(f"<h4>{title}</h4>" in html for title in ("Spec (YAML)", "Command", "Files", "Checks"))
    assert "max_steps: 5" in str(preview)


def test_form_flag_opens_the_form_filled_in(shell):
    form = shell.run_line_magic("finetune", "--form --task summarization --steps 12 --zero 2")
    assert isinstance(form, SpecForm)
    assert form.fields["task"].value == "summarization" and form.fields["train.max_steps"].value == "12"
    assert form.fields["parallelism.strategy"].value == "deepspeed" and form.fields["parallelism.zero_stage"].value == 2
    assert form.spec == dry_run(shell, "--task summarization --steps 12 --zero 2")


def test_launch_list_and_stop_a_job(shell, store, capsys):
    job = shell.run_line_magic(
        "finetune", f"--task text-classification --name sleeper --set script.path={SCRIPTS / 'sleepy.py'}"
    )
    assert f"job {job.id} (sleeper, local) launched" in capsys.readouterr().out
    table = shell.run_line_magic("jobs", "")
    assert list(table.index) == [job.id]
    assert {"name", "backend", "status", "progress", "loss", "samples/s", "started", "ended"} <= set(table.columns)
    assert table.loc[job.id, "name"] == "sleeper" and table.loc[job.id, "status"] in ("queued", "running")
    shell.run_line_magic("finetune_stop", job.id[:5])
    assert capsys.readouterr().out.strip() == f"job {job.id} stopped"
    table = shell.run_line_magic("jobs", "--status stopped")
    assert table.loc[job.id, "status"] == "stopped" and table.loc[job.id, "ended"]
    assert shell.run_line_magic("jobs", "--status running") is None
    with pytest.raises(UsageError, match="no job 'ffffffff'"):
        shell.run_line_magic("finetune_stop", "ffffffff")


def test_a_launch_this_machine_cannot_start_is_refused(shell, store):
    with pytest.raises(
        UsageError,
        match=r"^hardware.accelerator 'neuron' needs a Trainium instance, but neuron-ls "
        r"is not on PATH here; .* `nbtoolkit launch-files SPEC`$",
    ):
        shell.run_line_magic(
            "finetune", "--task causal-lm --accelerator neuron --compile neuron --set dataset.pad_to_max_length=true"
        )
    assert store.list() == []


def test_job_magic_shows_the_chart_and_the_log_tail(shell, store, capsys):
    from nbtoolkit.api import launch

    job = launch({"task": "text-classification", "script": {"path": str(SCRIPTS / "sleepy.py")}}, store=store)
    try:
        shell.run_line_magic("job", f"{job.id} --tail 3")
        printed = capsys.readouterr().out
        assert f"id {job.id}" in printed and f"last 3 lines of {job.dir / 'output.log'}" in printed
    finally:
        job.stop()


def test_finetune_compare_compares_the_jobs(shell, store):
    from nbtoolkit.api import launch

    jobs = [
        launch(
            {"task": "text-classification", "name": f"run{index}", "script": {"path": str(SCRIPTS / "sleepy.py")}},
            store=store,
        )
        for index in range(2)
    ]
    try:
        for job in jobs:
            wait_for(lambda job=job: len(job.records()) >= 4)
    finally:
        for job in jobs:
            job.stop()
    comparison = shell.run_line_magic("finetune_compare", f"{jobs[0].id} {jobs[1].id} --baseline {jobs[1].id}")
    assert sorted(comparison.table.index) == ["run0", "run1"]
