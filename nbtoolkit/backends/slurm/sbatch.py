"""Rendering a Slurm job: `sbatch.sh` (the batch script) and `node.sh` (what srun runs on each node).

node.sh is the run.sh our torchrun/DeepSpeed backends render for the spec, with what only the
allocation knows left to the shell: the node count and rank (`$SLURM_NNODES`, `$SLURM_NODEID`), the
rendezvous host (the allocation's first node) and port, and the rendezvous id (`$SLURM_JOB_ID`).
User text reaches the scripts only quoted (shlex) or checked against a plain-name pattern.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import replace

from nbtoolkit.backends.program import program_args
from nbtoolkit.backends.slurm.settings import SlurmSpec
from nbtoolkit.backends.torchrun.render import MULTI_NODE_PORT
from nbtoolkit.launching.launch import Launch
from nbtoolkit.launching.rendering import comment
from nbtoolkit.launching.runtime import SPEC_FILE
from nbtoolkit.spec import RunSpec

SCRIPT = "sbatch.sh"
NODE_SCRIPT = "node.sh"
#: Slurm writes the batch job's output here (in the job folder, where sbatch is run); %j is the job id
OUTPUT_PATTERN = "slurm-%j.out"
#: launcher options only the allocation knows -> their shell form in node.sh (exported by sbatch.sh)
ALLOCATION_OPTIONS = {
    "--nnodes=": '--nnodes="$SLURM_NNODES"',
    "--rdzv_endpoint=": '--rdzv_endpoint="$MASTER_ADDR:$MASTER_PORT"',
    "--rdzv_id=": '--rdzv_id="$SLURM_JOB_ID"',
    "--master_addr=": '--master_addr="$MASTER_ADDR"',
    "--master_port=": '--master_port="$MASTER_PORT"',
}
#: a rendezvous port per Slurm job when the spec names none, so two jobs sharing a node do not collide
JOB_PORT = "$(( 20000 + SLURM_JOB_ID % 20000 ))"


def output_file(job_id: str) -> str:
    return OUTPUT_PATTERN.replace("%j", job_id)


def program_spec(spec: RunSpec) -> RunSpec:
    """The spec nbtoolkit's training program reads: with requeue on, it resumes from the job's last checkpoint
    in output/ when there is one (a requeued job starts its script again), else from the start. A user's
    script resumes from its own checkpoints."""
    if (spec.slurm or SlurmSpec()).requeue and spec.resume is None and spec.script is None:
        return spec.model_copy(update={"resume": "latest"})
    return spec


def node_spec(spec: RunSpec) -> RunSpec:
    """The spec as one node of the allocation runs it: the local launch of the same processes, with the
    rendezvous host left to the shell (the port given so that rendering binds none here)."""
    hardware = spec.hardware.model_copy(
        update={
            "target": "local",
            "master_addr": "$MASTER_ADDR",
            "master_port": spec.hardware.master_port or MULTI_NODE_PORT,
        }
    )
    return program_spec(spec).model_copy(update={"hardware": hardware, "slurm": None})


def allocation_words(spec: RunSpec, local: Launch) -> dict[str, str]:
    """The launcher options of the local launch that only the allocation knows -> their shell form (the
    program's own arguments, after the launcher's, are left alone)."""
    argv = local.main_stage.argv
    words = {}
    for item in argv[: len(argv) - len(program_args(spec))]:
        prefix = next((prefix for prefix in ALLOCATION_OPTIONS if item.startswith(prefix)), None)
        if prefix is not None:
            words[item] = ALLOCATION_OPTIONS[prefix]
    return words


def node_launch(spec: RunSpec, local: Launch) -> Launch:
    """The local launch as node.sh: run by srun on every node with that node's rank."""
    note = f"sbatch.sh runs this on each of the {spec.hardware.nodes} node(s) with the node's rank ($SLURM_NODEID)"
    return replace(local, per_node={**local.per_node, **allocation_words(spec, local)}, notes=[note, *local.notes])


def sbatch_options(spec: RunSpec) -> list[str]:
    """The `#SBATCH` options: one task per node (its launcher starts the node's workers), output appended
    in the job folder (a requeued run continues the same file)."""
    hw, slurm = spec.hardware, spec.slurm or SlurmSpec()
    options = [
        f"--job-name={re.sub(r'[^A-Za-z0-9._-]', '-', spec.display_name)}",
        f"--nodes={hw.nodes}",
        "--ntasks-per-node=1",
    ]
    options.append(f"--gpus-per-node={hw.devices}" if hw.accelerator == "cuda" else f"--cpus-per-task={hw.devices}")
    if slurm.partition:
        options.append(f"--partition={slurm.partition}")
    if slurm.time_limit is not None:
        options.append(f"--time={slurm.time_limit}")
    if slurm.account:
        options.append(f"--account={slurm.account}")
    options += ["--requeue" if slurm.requeue else "--no-requeue", "--open-mode=append", f"--output={OUTPUT_PATTERN}"]
    return options


def sbatch_script(spec: RunSpec, notes: list[str]) -> str:
    """The batch script: the rendezvous host and port for every node, then node.sh on each node via srun."""
    port = str(spec.hardware.master_port) if spec.hardware.master_port else JOB_PORT
    cpus = [f"--cpus-per-task={spec.hardware.devices}"] if spec.hardware.accelerator == "cpu" else []
    srun = [
        "srun",
        "--ntasks-per-node=1",
        *cpus,
        "--kill-on-bad-exit=1",
        "bash",
        "-c",
        f'exec bash {NODE_SCRIPT} "$SLURM_NODEID"',
    ]
    lines = [
        "#!/usr/bin/env bash",
        *(f"#SBATCH {option}" for option in sbatch_options(spec)),
        f"# nbtoolkit launch (slurm): `sbatch {SCRIPT}` in this folder submits it",
        *map(comment, notes),
        "set -euo pipefail",
        "# the allocation's first node hosts the rendezvous",
        'MASTER_ADDR="$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n1)"',
        f"MASTER_PORT={port}",
        "export MASTER_ADDR MASTER_PORT",
        (
            'echo "[nbtoolkit] slurm: job $SLURM_JOB_ID on $SLURM_JOB_NUM_NODES node(s) ($SLURM_JOB_NODELIST), '
            'rendezvous $MASTER_ADDR:$MASTER_PORT, restart ${SLURM_RESTART_COUNT:-0}"'
        ),
        " ".join(shlex.quote(word) for word in srun),
    ]
    return "\n".join(lines) + "\n"


def slurm_files(spec: RunSpec, local: Launch, notes: list[str]) -> dict[str, str]:
    """The node's files (spec, DeepSpeed config ...), the program's spec, node.sh and sbatch.sh."""
    return {
        **local.files,
        SPEC_FILE: program_spec(spec).model_dump_json(indent=2),
        NODE_SCRIPT: node_launch(spec, local).run_sh(),
        SCRIPT: sbatch_script(spec, notes),
    }
