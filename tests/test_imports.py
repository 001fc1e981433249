"""`import nbtoolkit` and the light modules (spec, jobs, metrics, api, cli) never load heavy libraries."""

from __future__ import annotations

import subprocess

import pytest

from tests.conftest import PYTHON

HEAVY = ("torch", "transformers", "deepspeed", "sagemaker", "datasets", "matplotlib", "boto3", "botocore")


@pytest.mark.parametrize("module", ["nbtoolkit", "nbtoolkit.api", "nbtoolkit.cli", "nbtoolkit.backends.local.render",
                                    "nbtoolkit.planner", "nbtoolkit.catalog", "nbtoolkit.server.extension",
                                    "nbtoolkit.backends.torchrun.render", "nbtoolkit.backends.deepspeed.render",
                                    "nbtoolkit.backends.neuron.render", "nbtoolkit.backends.sagemaker.render",
                                    "nbtoolkit.backends.slurm.render", "nbtoolkit.backends.slurm.follow",
                                    "nbtoolkit.spec"])
def test_light_imports(module):
    result = subprocess.run([PYTHON, "-X", "importtime", "-c", f"import {module}"], capture_output=True, text=True,
                            check=True)
    loaded = {line.split("|")[-1].strip().split(".")[0] for line in result.stderr.splitlines() if "|" in line}
    assert module.split(".")[0] in loaded
    assert not loaded & set(HEAVY), f"{module} imports {sorted(loaded & set(HEAVY))}"
