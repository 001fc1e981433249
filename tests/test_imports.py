"""`import nbtoolkit` and the light modules (spec, jobs, metrics, api, cli) never load heavy libraries."""

from __future__ import annotations

import subprocess

import pytest

from tests.conftest import PYTHON

HEAVY = ("torch", "transformers", "deepspeed", "sagemaker", "datasets", "matplotlib", "boto3", "botocore")


@pytest.mark.parametrize(
    "module",
    [
        "nbtoolkit",
        "nbtoolkit.api",
        "nbtoolkit.cli",
        "nbtoolkit.backends.local.render",
        "nbtoolkit.planner",
        "nbtoolkit.hardware.catalog",
        "nbtoolkit.server.extension",
        "nbtoolkit.backends.torchrun.render",
        "nbtoolkit.backends.deepspeed.render",
        "nbtoolkit.backends.neuron.render",
        "nbtoolkit.backends.sagemaker.render",
        "nbtoolkit.backends.slurm.render",
        "nbtoolkit.backends.slurm.follow",
        "nbtoolkit.spec",
        "nbtoolkit.tasks",  # every registered task's package
        "nbtoolkit.tasks.grpo.rules",  # run as a spec is built
    ],
)
def test_light_imports(module):
    result = subprocess.run(
        [PYTHON, "-X", "importtime", "-c", f"import {module}"], capture_output=True, text=True, check=True
    )
    loaded = {line.split("|")[-1].strip().split(".")[0] for line in result.stderr.splitlines() if "|" in line}
    assert module.split(".")[0] in loaded
    assert not loaded & set(HEAVY), f"{module} imports {sorted(loaded & set(HEAVY))}"


SEEN_BY_TRANSFORMERS = """
import sys
from nbtoolkit.spec import load_spec
from nbtoolkit.train.program import hide_unused_integrations, unused_integrations
hide_unused_integrations(unused_integrations(load_spec(sys.argv[1])))
from accelerate.utils import is_boto3_available, is_mlflow_available
from transformers.integrations.deepspeed import is_deepspeed_available
from transformers.utils import is_peft_available, is_scipy_available
available = {"deepspeed": is_deepspeed_available(), "peft": is_peft_available(), "mlflow": is_mlflow_available(),
             "scipy": is_scipy_available(), "boto3": is_boto3_available()}
print(sorted(name for name, yes in available.items() if yes))
"""


@pytest.mark.parametrize(
    "spec, available",
    [
        ("task: text-classification", []),
        ("task: text-classification\nparallelism: {strategy: deepspeed, zero_stage: 2}", ["deepspeed"]),
        ("task: text-classification\nadapter: {type: lora}\nreport_to: [mlflow]", ["boto3", "mlflow", "peft"]),
    ],
)
def test_the_training_program_sees_only_the_integrations_its_run_uses(spec, available, tmp_path):
    """Checking for DeepSpeed, PEFT or MLflow imports it when installed: 2.5 s of CPU in every rank of a run without them
    (SciPy, which no task uses, about 1 s more; boto3, which only MLflow's S3 store needs, a few tenths)."""
    path = tmp_path / "spec.yaml"
    path.write_text(spec)
    result = subprocess.run(
        [PYTHON, "-c", SEEN_BY_TRANSFORMERS, str(path)], capture_output=True, text=True, cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.splitlines()[-1] == str(available)
