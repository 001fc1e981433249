"""Credentials: redacted in everything a job writes or serves; passed through the environment; private folders."""

from __future__ import annotations

import json
import stat

import pytest

from nbtoolkit.api import launch
from nbtoolkit.backends import LaunchError
from nbtoolkit.backends.dispatch import render
from nbtoolkit.backends.sagemaker.job import JOB_FILE
from nbtoolkit.launching.credentials import is_credential, redact_args
from nbtoolkit.runner.store import LOG_FILE
from nbtoolkit.spec import load_spec
from tests.conftest import SCRIPTS

SECRET = "hf_SECRETVALUE123"
ROLE = "arn:aws:iam::111122223333:role/sagemaker"


@pytest.mark.parametrize(
    "name,credential",
    [
        ("--hf_token", True),
        ("--hub-token", True),
        ("password", True),
        ("api_key", True),
        ("AWS_SECRET_ACCESS_KEY", True),
        ("access_key", True),
        ("--tokenizer_name", False),
        ("max_tokens", False),
        ("--learning_rate", False),
    ],
)
def test_one_pattern_says_which_names_are_credentials(name, credential):
    assert is_credential(name) is credential


def test_values_after_credential_flags_are_redacted_and_references_kept():
    args = ["--hf_token", SECRET, f"--api-key={SECRET}", "--hub_token", "$HF_TOKEN", "--password=${PW}", "--steps", "3"]
    assert redact_args(args) == [
        "--hf_token",
        "***",
        "--api-key=***",
        "--hub_token",
        "$HF_TOKEN",
        "--password=${PW}",
        "--steps",
        "3",
    ]


def test_a_literal_credential_is_in_no_rendered_file_and_cannot_be_launched(home):
    spec = load_spec(
        {
            "task": "text-classification",
            "extra": {"hub_token": SECRET},
            "script": {"path": str(SCRIPTS / "paced.py"), "args": ["--hf_token", SECRET]},
        }
    )
    launch_ = render(spec)
    written = launch_.to_json() + launch_.run_sh() + "".join(launch_.files.values())
    assert SECRET not in written and "***" in json.loads(launch_.files["spec.json"])["extra"]["hub_token"]
    with pytest.raises(LaunchError, match=r"--hf_token holds a credential.*export HF_TOKEN=.*\$HF_TOKEN"):
        launch(spec)


def test_sagemaker_hyperparameters_and_exports_hold_no_credential(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("print('hi')\n")
    spec = load_spec(
        {
            "task": "text-classification",
            "hardware": {"target": "sagemaker", "instance_type": "ml.g5.xlarge"},
            "sagemaker": {"role": ROLE, "region": "us-east-1"},
            "script": {"path": str(script), "args": ["--hf_token", SECRET, "--epochs", "1"]},
        }
    )
    launch_ = render(spec)
    job = json.loads(launch_.files[JOB_FILE])
    assert job["hyperparameters"] == {"hf_token": "***", "epochs": "1"}
    assert "sagemaker/launch_v3.py" in launch_.files and "'hf_token': '***'" in launch_.files["sagemaker/launch_v2.py"]
    assert SECRET not in "".join(launch_.files.values()) + launch_.to_json() + launch_.run_sh()


def test_a_token_from_the_environment_reaches_the_run_but_no_file(store, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", SECRET)
    job = launch(
        {
            "task": "text-classification",
            "script": {"path": str(SCRIPTS / "paced.py"), "args": ["--steps", "2", "--echo-token", "$HF_TOKEN"]},
        }
    )
    assert job.wait(timeout=120) == "succeeded", job.logs()
    assert f"token seen: *** reversed {SECRET[::-1]}" in job.logs()  # the program got the value, the log not
    assert "stage train:" in job.logs() and "--echo-token '$HF_TOKEN'" in job.logs()  # ... the log line the name
    for name in ("spec.json", "launch.json", "run.sh"):
        assert SECRET not in (job.dir / name).read_text()
    assert '--echo-token "${HF_TOKEN}"' in (job.dir / "run.sh").read_text()


def test_an_unset_token_variable_is_one_sentence_before_anything_starts(store, monkeypatch):
    monkeypatch.delenv("HF_TOKEN", raising=False)
    with pytest.raises(LaunchError, match=r"^\$HF_TOKEN is not set in this environment; export HF_TOKEN"):
        launch(
            {
                "task": "text-classification",
                "script": {"path": str(SCRIPTS / "paced.py"), "args": ["--hf_token", "$HF_TOKEN"]},
            }
        )
    assert store.list() == []


def test_job_folders_files_and_the_store_are_private(store):
    job = launch(
        {"task": "text-classification", "script": {"path": str(SCRIPTS / "paced.py"), "args": ["--steps", "1"]}}
    )
    job.wait(timeout=120)
    mode = lambda path: stat.S_IMODE(path.stat().st_mode)  # noqa: E731  (a one-line helper for the assert below)
    assert mode(job.dir) == 0o700 and mode(store.jobs_root) == 0o700 and mode(store.db_path) == 0o600
    for name in ("spec.json", "launch.json", LOG_FILE, "metrics.jsonl", "supervisor.log"):
        assert mode(job.dir / name) == 0o600, name
    assert mode(job.dir / "run.sh") == 0o700


def test_a_token_reference_cannot_be_sent_to_sagemaker(tmp_path, monkeypatch):
    from nbtoolkit.launching.credentials import credential_problem

    monkeypatch.setenv("HF_TOKEN", SECRET)
    script = tmp_path / "train.py"
    script.write_text("print('hi')\n")
    spec = load_spec(
        {
            "task": "text-classification",
            "hardware": {"target": "sagemaker", "instance_type": "ml.g5.xlarge"},
            "sagemaker": {"role": ROLE, "region": "us-east-1"},
            "script": {"path": str(script), "args": ["--hf_token", "$HF_TOKEN"]},
        }
    )
    assert credential_problem(spec).startswith("$HF_TOKEN cannot reach a SageMaker job")
