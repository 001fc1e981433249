"""The SkyPilot task of a spec (pure): resources, nodes, the checkpoint bucket, setup, and the run.

Every node runs the launch a local multi-node run of the same spec renders (torchrun, or
DeepSpeed's launcher), through its run.sh: what differs between nodes comes from SkyPilot's
environment when the node runs it (`SKYPILOT_NODE_RANK`, the first of `SKYPILOT_NODE_IPS` as the
rendezvous host, `SKYPILOT_NUM_NODES`, `SKYPILOT_NUM_GPUS_PER_NODE`). The node's spec resumes from
the latest checkpoint in its output folder, where the bucket is mounted: a managed job that
SkyPilot recovers after a preemption continues from there.
"""

from __future__ import annotations

import dataclasses
import shlex
import sys
from pathlib import Path
from typing import Any

import yaml

import nbtoolkit
from nbtoolkit.backends import LOCAL
from nbtoolkit.backends.dispatch import render
from nbtoolkit.backends.skypilot.settings import SkyPilotSpec
from nbtoolkit.backends.torchrun.render import MULTI_NODE_PORT
from nbtoolkit.hardware import catalog
from nbtoolkit.launching.credentials import references
from nbtoolkit.launching.launch import Launch
from nbtoolkit.launching.shipping import DISTRIBUTION
from nbtoolkit.spec import RunSpec
from nbtoolkit.spec_parts.trackers import PACKAGES

TASK_FILE = "skypilot/task.yaml"
#: the folder SkyPilot syncs to every node (as ~/sky_workdir) and runs the task in
WORKDIR = "skypilot/workdir"
#: the training program's output folder on a node (`output`, relative to the workdir): checkpoints and the model
NODE_OUTPUT = "~/sky_workdir/output"
#: where a spec's local data files are copied on each node (SkyPilot's file_mounts), one folder per split; an
#: absolute path, as the node spec holds it (a `~` would be expanded on this machine as the launch renders)
NODE_DATA = "/tmp/nbtoolkit-data"
#: the rendezvous host in the node launch: the task's run sets it to the first of SKYPILOT_NODE_IPS
MASTER = "$MASTER_ADDR"
RUN = """\
set -euo pipefail
export MASTER_ADDR="$(echo "$SKYPILOT_NODE_IPS" | head -n1)"
bash run.sh "$SKYPILOT_NODE_RANK"
"""


def node_spec(spec: RunSpec) -> RunSpec:
    """The spec each node runs: a local launch on `hardware.nodes` nodes that resumes from its latest checkpoint,
    reading local data files where the task's file_mounts copy them."""
    hardware = spec.hardware.model_copy(
        update={
            "target": LOCAL,
            "master_addr": MASTER,
            "node_rank": 0,
            "master_port": spec.hardware.master_port or MULTI_NODE_PORT,
        }
    )
    update = {"hardware": hardware, "skypilot": None, "resume": spec.resume or "latest"}
    if spec.dataset.files:
        files = {split: remote for split, (remote, _) in data_mounts(spec).items()}
        update["dataset"] = spec.dataset.model_copy(update={"files": files})
    return spec.model_copy(update=update)


def data_mounts(spec: RunSpec) -> dict[str, tuple[str, str]]:
    """split -> (the file's path on a node, the file here): SkyPilot copies each to every node before setup."""
    return {
        split: (f"{NODE_DATA}/{split}/{Path(path).name}", path) for split, path in (spec.dataset.files or {}).items()
    }


def node_launch(spec: RunSpec) -> Launch:
    """The local backend's launch of the node spec, its run.sh reading SkyPilot's environment on each node."""
    node = node_spec(spec)
    launch = render(node)  # the registry's: with the node's spec.json
    hardware = node.hardware
    from_environment = {
        sys.executable: "python",  # the node's interpreter, where setup installed nbtoolkit
        f"--rdzv_endpoint={MASTER}:{hardware.master_port}": f'--rdzv_endpoint="$MASTER_ADDR":{hardware.master_port}',
        f"--master_addr={MASTER}": '--master_addr="$MASTER_ADDR"',
        f"--nnodes={hardware.nodes}": '--nnodes="$SKYPILOT_NUM_NODES"',
        f"--nproc_per_node={hardware.devices}": '--nproc_per_node="$SKYPILOT_NUM_GPUS_PER_NODE"',
        f"--num_gpus={hardware.devices}": '--num_gpus="$SKYPILOT_NUM_GPUS_PER_NODE"',
    }
    argv = {item for stage in launch.stages for item in stage.argv}
    per_node = {**launch.per_node, **{item: word for item, word in from_environment.items() if item in argv}}
    return dataclasses.replace(launch, per_node=per_node)


def requirement(spec: RunSpec) -> str:
    """nbtoolkit at this version, with the extras the run needs."""
    extras = spec.extras_used
    return f"{DISTRIBUTION}{'[' + ','.join(extras) + ']' if extras else ''}=={nbtoolkit.__version__}"


def setup(spec: RunSpec) -> str:
    """What each node installs before the run: nbtoolkit, then each tracker's package as the launch check says."""
    trackers = sorted({PACKAGES[tracker][1] for tracker in spec.report_to})
    return "\n".join(["set -euo pipefail", f"pip install {shlex.quote(requirement(spec))}", *trackers]) + "\n"


def resources(spec: RunSpec, block: SkyPilotSpec) -> dict[str, Any]:
    """SkyPilot's `resources`: the first choice, then the fallbacks in order."""
    first = {
        "accelerators": accelerators(spec, block),
        "instance_type": spec.hardware.instance_type,
        "cloud": block.cloud,
        "region": block.region,
    }
    first = {key: value for key, value in first.items() if value is not None}
    found: dict[str, Any] = {"use_spot": block.use_spot}
    if not block.fallbacks:
        return {**found, **first}
    fallbacks = [fallback.model_dump(exclude_none=True) for fallback in block.fallbacks]
    return {**found, "ordered": [first, *fallbacks]}


def task(spec: RunSpec, block: SkyPilotSpec) -> dict[str, Any]:
    """The task as SkyPilot's YAML describes one."""
    found: dict[str, Any] = {
        "name": spec.display_name,
        "workdir": WORKDIR,
        "resources": resources(spec, block),
        "num_nodes": spec.hardware.nodes,
    }
    secrets = references([], spec.extra)  # `$HF_TOKEN` in extra: the node's program reads it from its environment
    if secrets:  # null: a value SkyPilot takes at launch (the follower's, as `--secret NAME`), never written here
        found["secrets"] = dict.fromkeys(secrets)
    mounts = dict(data_mounts(spec).values())
    if block.bucket:
        mounts[NODE_OUTPUT] = {"source": block.bucket, "mode": block.bucket_mode}
    if mounts:
        found["file_mounts"] = mounts
    found["setup"] = setup(spec)
    found["run"] = RUN
    return found


def _block_text(dumper: yaml.SafeDumper, text: str) -> yaml.ScalarNode:
    """Multi-line strings (setup, run) as YAML blocks, as a person writes them."""
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style="|" if "\n" in text else None)


class _TaskDumper(yaml.SafeDumper):
    pass


_TaskDumper.add_representer(str, _block_text)


def task_files(spec: RunSpec, block: SkyPilotSpec) -> dict[str, str]:
    """task.yaml and the workdir every node gets (the node's spec, DeepSpeed config, hostfile, run.sh)."""
    launch = node_launch(spec)
    workdir = {f"{WORKDIR}/{name}": text for name, text in {**launch.files, "run.sh": launch.run_sh()}.items()}
    return {TASK_FILE: yaml.dump(task(spec, block), Dumper=_TaskDumper, sort_keys=False), **workdir}


#: the catalog's device names where SkyPilot's differ (A100 means the 40 GB one to both)
SKYPILOT_GPU_NAMES = {"A100-40GB": "A100", "H100-80GB": "H100"}


def settings(spec: RunSpec) -> SkyPilotSpec:
    """The spec's block (defaults when it has none)."""
    return spec.skypilot or SkyPilotSpec()


def accelerators(spec: RunSpec, block: SkyPilotSpec) -> str | None:
    """The first choice's GPUs per node: the block's, else those of the catalog's instance type."""
    if block.accelerators:
        return block.accelerators
    if not spec.hardware.instance_type:
        return None
    try:
        device = catalog.instance(spec.hardware.instance_type).device
    except catalog.CatalogError:
        return None
    return f"{SKYPILOT_GPU_NAMES.get(device.name, device.name)}:{spec.hardware.devices}"
