"""The torchrun backend's launch: render, and the checks it makes."""

from __future__ import annotations

import hashlib
import json
import sys

from nbtoolkit.backends.program import launch_env, program_args, run_dir, writes_own_metrics
from nbtoolkit.launching.launch import Launch, Stage, free_port, job_path
from nbtoolkit.spec import RunSpec

NAME = "torchrun"
#: torchrun through this interpreter, so a job needs no activated environment
TORCHRUN = [sys.executable, "-m", "torch.distributed.run"]
MULTI_NODE_PORT = 29500
#: per-rank stdout/stderr files, besides the prefixed lines in the job's log
RANK_LOG_DIR = "logs"
#: torchrun's own default for several workers; without it every rank starts one thread per core
WORKER_ENV = {"OMP_NUM_THREADS": "1"}
#: each line a worker prints is prefixed with its global rank, e.g. `[rank1]:`; metrics parsers keep rank 0
TORCHRUN_ENV = {"TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE": "[rank${rank}]:"}


def rendezvous_port(spec: RunSpec) -> int:
    """The spec's master_port, else a free one here (one node) or torchrun's usual 29500 (several)."""
    if spec.hardware.master_port is not None:
        return spec.hardware.master_port
    return free_port() if spec.hardware.nodes == 1 else MULTI_NODE_PORT


def rendezvous_id(spec: RunSpec) -> str:
    """The same on every node of a run: a digest of the spec without its node rank."""
    data = spec.model_dump(mode="json")
    data["hardware"].pop("node_rank")
    digest = hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:12]
    return f"nbtoolkit-{digest}"


def node_options(spec: RunSpec) -> dict[str, str]:
    """On several nodes, the options that differ between them: as given to this node -> as run.sh
    writes them. Node 0 hosts the c10d rendezvous store; the others connect to it."""
    if spec.hardware.nodes == 1:
        return {}
    rank = spec.hardware.node_rank
    return {
        f"--node_rank={rank}": '--node_rank="$NODE_RANK"',
        f"--rdzv_conf=is_host={int(rank == 0)}": '--rdzv_conf=is_host="$(( NODE_RANK == 0 ))"',
    }


def torchrun_argv(spec: RunSpec, program: list[str], *, port: int, launcher: list[str] = TORCHRUN) -> list[str]:
    """`torchrun [options] PROGRAM...` for the spec: `hardware.devices` workers on each of `hardware.nodes`.

    Underscore option names, which every torchrun accepts (the Neuron virtualenvs' older ones too).
    """
    hardware = spec.hardware
    return [
        *launcher,
        f"--nnodes={hardware.nodes}",
        f"--nproc_per_node={hardware.devices}",
        "--rdzv_backend=c10d",
        f"--rdzv_endpoint={hardware.master_addr}:{port}",
        f"--rdzv_id={rendezvous_id(spec)}",
        *node_options(spec),
        f"--log_dir={job_path(RANK_LOG_DIR, in_job_dir=run_dir(spec) is None)}",
        "--tee=3",
        *program,
    ]


def multi_process_launch(
    spec: RunSpec,
    stages: list[Stage],
    *,
    backend: str,
    per_node: dict[str, str],
    env: dict[str, str] | None = None,
    files: dict[str, str] | None = None,
    notes: list[str] | None = None,
) -> Launch:
    """A Launch of several workers per node; on several nodes its run.sh takes the node rank."""
    multi_node = spec.hardware.nodes > 1
    notes = list(notes or [])
    if multi_node:
        notes.append(
            f"run this script on each of the {spec.hardware.nodes} nodes with that node's rank; "
            f"node 0 is {spec.hardware.master_addr}"
        )
    return Launch(
        backend=backend,
        stages=stages,
        env={**launch_env(spec), **WORKER_ENV, **(env or {})},
        files=files or {},
        notes=notes,
        per_node=per_node if multi_node else {},
        nodes=spec.hardware.nodes,
        workdir=run_dir(spec),
    )


def torchrun_launch(
    spec: RunSpec,
    stages: list[Stage],
    *,
    backend: str,
    env: dict[str, str] | None = None,
    files: dict[str, str] | None = None,
    notes: list[str] | None = None,
) -> Launch:
    """A Launch whose stages run through `torchrun_argv`."""
    return multi_process_launch(
        spec,
        stages,
        backend=backend,
        per_node=node_options(spec),
        env={**TORCHRUN_ENV, **(env or {})},
        files=files,
        notes=notes,
    )


def train_stage(spec: RunSpec, port: int, launcher: list[str] = TORCHRUN) -> Stage:
    return Stage(
        name="train",
        argv=torchrun_argv(spec, program_args(spec), port=port, launcher=launcher),
        metrics_from_log=not writes_own_metrics(spec),
    )


def render(spec: RunSpec) -> Launch:
    return torchrun_launch(spec, [train_stage(spec, rendezvous_port(spec))], backend=NAME)
