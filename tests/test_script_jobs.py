"""A user's own script as a job: a run_clm.py-style script (HfArgumentParser, Trainer, a relative
--train_file, evaluation after training, a save at the end) on 1 and 2 CPU ranks, recorded by autolog
at the Trainer's own steps; a custom loop reporting with nbtoolkit.log; the autolog boot chaining a
site's own sitecustomize; and what a script launch renders (its working directory, its env).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from nbtoolkit.api import launch
from nbtoolkit.backends.dispatch import render
from nbtoolkit.backends.program import AUTOLOG_BOOT
from nbtoolkit.inputs.bundled import ASSETS, TOKENIZERS
from nbtoolkit.metrics.parse import classify
from nbtoolkit.metrics.series import read_metrics
from nbtoolkit.runner.listing import listing_row
from nbtoolkit.spec import load_spec, spec_warnings
from tests.conftest import PYTHON, SCRIPTS

MAX_STEPS, LOGGING_STEPS = 60, 5
TIMEOUT = 300


@pytest.fixture
def project(tmp_path, monkeypatch) -> Path:
    """The user's own folder, where they launch from: their data under data/, as the examples' READMEs have it."""
    folder = tmp_path / "my project"  # a space, as real folders have: run.sh must quote it
    (folder / "data").mkdir(parents=True)
    rows = [json.loads(line)["text"] for line in (ASSETS / "data" / "causal-lm" / "train.jsonl").open()]
    (folder / "data" / "train.txt").write_text("\n".join(rows) + "\n")
    monkeypatch.chdir(folder)
    return folder


def clm_spec(devices: int) -> dict:
    args = [
        "--tokenizer_name",
        str(TOKENIZERS / "byte-bpe"),
        "--train_file",
        "data/train.txt",
        "--output_dir",
        "out",
        "--do_train",
        "--do_eval",
        "--max_steps",
        MAX_STEPS,
        "--logging_steps",
        LOGGING_STEPS,
        "--per_device_train_batch_size",
        8,
        "--save_strategy",
        "no",
        "--report_to",
        "none",
        "--history_file",
        "log_history.json",
        "--seed",
        0,
        "--include_num_input_tokens_seen",  # the script counts tokens (autolog turns nothing on): tokens/s
        "true",
    ]
    return {
        "task": "causal-lm",
        "script": {"path": str(SCRIPTS / "run_clm_style.py"), "args": args},
        "hardware": {"devices": devices},
    }


@pytest.mark.parametrize("devices", [1, 2])
def test_run_clm_style_script_is_recorded_at_the_trainers_own_steps(devices, project, store):
    job = launch(clm_spec(devices), store=store)
    assert job.wait(timeout=TIMEOUT) == "succeeded", job.logs(tail=40)
    # relative paths meant the launch folder: the data was found there and the model saved there
    assert (project / "out" / "model.safetensors").is_file()
    assert not (job.dir / "out").exists()
    assert (
        f"distributed: world size {devices}, deepspeed: False" in job.logs()
    )  # both ranks trained together (CPU backend)

    records = read_metrics(job.dir / "metrics.jsonl")
    history = json.loads((project / "log_history.json").read_text())
    train = [record for record in records if record["kind"] == "train"]
    logged = [entry["step"] for entry in history if "loss" in entry]
    assert [record["step"] for record in train] == logged == list(range(LOGGING_STEPS, MAX_STEPS + 1, LOGGING_STEPS))
    assert [record["loss"] for record in train] == [entry["loss"] for entry in history if "loss" in entry]
    assert all(record["samples_per_second"] > 0 and record["tokens_per_second"] > 0 for record in train)
    evals = [record for record in records if record["kind"] == "eval"]
    assert (
        [record["step"] for record in evals]
        == [entry["step"] for entry in history if "eval_loss" in entry]
        == [MAX_STEPS]
    )
    summary = [record for record in records if record["kind"] == "summary"]
    assert len(summary) == 1 and summary[0]["step"] == MAX_STEPS and summary[0]["peak_memory_mb"] > 0

    row = listing_row(job.record)  # what `nbtoolkit jobs` and `show` print
    assert row["progress"] == f"{MAX_STEPS}/{MAX_STEPS}"
    assert float(row["samples/s"]) > 0
    numbers = [{key: value for key, value in entry.items() if isinstance(value, (int, float))} for entry in history]
    print(
        f"\n{devices} rank(s): metrics.jsonl {[(r['kind'], r['step']) for r in records]}\n"
        f"log_history {[(classify(entry), entry['step']) for entry in numbers]}"
    )  # for the closing note


def test_a_deepspeed_script_finds_the_generated_config_in_the_job_folder(project, store):
    spec = clm_spec(2)
    spec["script"]["args"] = [
        *spec["script"]["args"][: spec["script"]["args"].index("--max_steps")],
        "--max_steps",
        20,
        "--logging_steps",
        5,
        "--per_device_train_batch_size",
        8,
        "--report_to",
        "none",
        "--deepspeed",
        "$NBTOOLKIT_JOB_DIR/ds_config.json",
        "--use_cpu",
    ]
    job = launch({**spec, "parallelism": {"strategy": "deepspeed", "zero_stage": 2}}, store=store)
    assert job.wait(timeout=TIMEOUT) == "succeeded", job.logs(tail=40)
    assert "distributed: world size 2, deepspeed: True" in job.logs()
    records = read_metrics(job.dir / "metrics.jsonl")
    assert [record["step"] for record in records if record["kind"] == "train"] == [5, 10, 15, 20]
    assert not (project / "ds_config.json").exists()


CUSTOM_LOOP = """
import nbtoolkit
print({'loss': 9.0, 'epoch': 0.1})  # a dict line the log parser would read: it must not be recorded twice
for step in range(1, 4):
    nbtoolkit.log(step=step * 10, loss=1.0 / step, learning_rate=0.001)
nbtoolkit.log(step=30, eval_accuracy=0.75)
"""


def test_a_custom_loop_reports_with_nbtoolkit_log(project, store):
    (project / "loop.py").write_text(CUSTOM_LOOP)
    job = launch({"task": "causal-lm", "script": "loop.py"}, store=store)
    assert job.wait(timeout=TIMEOUT) == "succeeded", job.logs(tail=20)
    records = read_metrics(job.dir / "metrics.jsonl")
    assert [(record["kind"], record["step"]) for record in records] == [
        ("train", 10),
        ("train", 20),
        ("train", 30),
        ("eval", 30),
    ]
    assert records[1]["loss"] == 0.5 and records[3]["eval_accuracy"] == 0.75


def test_nbtoolkit_log_outside_a_job_warns_once_and_records_nothing(tmp_path):
    code = (
        "import nbtoolkit, sys\nfor step in range(3): nbtoolkit.log(step=step, loss=1.0)\nprint('torch' in sys.modules)"
    )
    env = {key: value for key, value in os.environ.items() if key != "NBTOOLKIT_JOB_DIR"}
    result = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path, check=True)
    assert result.stdout.strip() == "False"
    assert result.stderr.count("not running as an nbtoolkit job") == 1
    assert list(tmp_path.iterdir()) == []


def test_the_autolog_boot_chains_a_sites_own_sitecustomize_and_leaves_other_scripts_alone(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import os\nos.environ['SITE_SETUP'] = 'ran'\n")
    code = "import os, sys\nprint(os.environ.get('SITE_SETUP'), 'transformers' in sys.modules)"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(AUTOLOG_BOOT), str(site), os.environ.get("PYTHONPATH", "")]),
        "NBTOOLKIT_JOB_DIR": str(tmp_path),
    }
    result = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert result.stdout.split() == ["ran", "False"] and result.stderr == ""


def test_deepspeed_scripts_on_cpu_are_told_to_pass_use_cpu():
    spec = {
        "task": "causal-lm",
        "script": "train.py",
        "hardware": {"devices": 2},
        "parallelism": {"strategy": "deepspeed"},
    }
    assert spec_warnings(load_spec(spec)) == [
        (
            "DeepSpeed on CPU: add --use_cpu to script.args (TrainingArguments "
            "use_cpu=True), else the script's ranks do not train together"
        )
    ]
    assert spec_warnings(load_spec({**spec, "script": {"path": "train.py", "args": ["--use_cpu"]}})) == []


def test_a_script_launch_runs_where_it_was_launched_from(project):
    (project / "train.py").write_text("")
    spec = load_spec(
        {
            "task": "causal-lm",
            "script": {"path": "train.py", "args": ["--deepspeed", "$NBTOOLKIT_JOB_DIR/ds_config.json"]},
            "hardware": {"devices": 2},
            "parallelism": {"strategy": "deepspeed"},
        }
    )
    launch_ = render(spec)
    assert json.loads(launch_.to_json())["workdir"] == str(project)
    assert f"export NBTOOLKIT_JOB_DIR=\"$PWD\"\ncd '{project}'\n" in launch_.run_sh()
    assert ' --log_dir="$NBTOOLKIT_JOB_DIR"/logs ' in launch_.run_sh()  # the job's files stay in the job folder
    assert ' --deepspeed "$NBTOOLKIT_JOB_DIR"/ds_config.json\n' in launch_.run_sh()
    assert any("--deepspeed $NBTOOLKIT_JOB_DIR/ds_config.json" in note for note in launch_.notes)
    assert launch_.env["PYTHONPATH"].split(os.pathsep)[0] == str(AUTOLOG_BOOT)
    assert "ACCELERATE_USE_CPU" not in launch_.env  # it turns DeepSpeed off: the spec warns to pass --use_cpu
    ddp = render(load_spec({"task": "causal-lm", "script": "train.py", "hardware": {"devices": 2}}))
    assert ddp.env["ACCELERATE_USE_CPU"] == "true"
    own = render(load_spec({"task": "causal-lm", "hardware": {"devices": 2}}))
    assert own.workdir is None and "ACCELERATE_USE_CPU" not in own.env and "--log_dir=logs" in own.main_stage.argv
