"""Devices follow the hardware: for every instance type in the catalog, the spec, the planner and
the rendered launch agree on how many processes the run starts (world size = devices x nodes)."""

from __future__ import annotations

import pytest

from nbtoolkit import backends
from nbtoolkit.backends import dispatch
from nbtoolkit.backends.sagemaker.job import training_job
from nbtoolkit.hardware import catalog
from nbtoolkit.planner import plan
from nbtoolkit.spec import load_spec

ROLE = "arn:aws:iam::111122223333:role/sagemaker"
NODES = 2


def local_spec(instance: catalog.InstanceType):
    return load_spec(
        {
            "task": "causal-lm",
            "precision": "bf16",
            "hardware": {"instance_type": instance.name, "nodes": NODES},
            "parallelism": {"strategy": "ddp"} if instance.device.kind == "cuda" else {},
        }
    )


def sagemaker_spec(instance: catalog.InstanceType):
    return load_spec(
        {
            "task": "causal-lm",
            "precision": "bf16",
            "hardware": {"target": "sagemaker", "instance_type": instance.name, "nodes": NODES},
            "sagemaker": {"role": ROLE, "region": "us-east-1"},
        }
    )


def launched_processes(argv: list[str]) -> int:
    """Processes a torchrun command line starts: --nproc_per_node x --nnodes, as torchrun reads them."""
    value = {item.split("=", 1)[0]: item.split("=", 1)[1] for item in argv if item.startswith("--") and "=" in item}
    return int(value["--nproc_per_node"]) * int(value["--nnodes"])


@pytest.mark.parametrize("name", catalog.instance_names())
def test_a_local_instance_type_starts_one_process_per_device_on_every_node(name):
    instance = catalog.instance(name)
    spec = local_spec(instance)
    assert spec.hardware.accelerator == instance.device.kind
    assert spec.world_size == instance.devices * NODES
    assert plan(spec).devices_per_node * plan(spec).nodes == spec.world_size
    assert launched_processes(dispatch.render(spec).main_stage.argv) == spec.world_size


@pytest.mark.parametrize(
    "name",
    [name for name in catalog.instance_names(sagemaker=True) if catalog.instance(name).sagemaker_price_usd is not None],
)
def test_a_sagemaker_instance_type_runs_one_process_per_device_on_every_instance(name):
    instance = catalog.instance(name)
    spec = sagemaker_spec(instance)
    job = training_job(spec)
    assert spec.world_size == instance.devices * NODES
    assert plan(spec).devices_per_node * plan(spec).nodes == spec.world_size
    assert (job.processes_per_node or 1) * job.instance_count == spec.world_size


def test_a_spec_that_names_its_devices_keeps_them():
    spec = load_spec({"task": "causal-lm", "hardware": {"instance_type": "p4d.24xlarge", "devices": 2}})
    assert (spec.hardware.accelerator, spec.world_size, plan(spec).devices_per_node) == ("cuda", 2, 2)


def test_a_cpu_run_on_a_named_instance_stays_one_process():
    spec = load_spec({"task": "causal-lm", "hardware": {"instance_type": "p4d.24xlarge", "accelerator": "cpu"}})
    assert spec.world_size == 1 and backends.backend_name(spec) == "local"


def test_the_saved_spec_loads_back_to_the_same_hardware():
    for hardware in (
        {"instance_type": "p4d.24xlarge", "accelerator": "cpu"},
        {"instance_type": "p4d.24xlarge"},
        {"instance_type": "trn1.32xlarge", "devices": 8},
    ):
        spec = load_spec({"task": "causal-lm", "hardware": hardware})
        assert load_spec(spec.to_dict()) == spec and load_spec(spec.to_yaml()) == spec
