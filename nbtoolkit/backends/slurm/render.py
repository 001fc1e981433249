"""The `slurm` backend's work: validate (as the spec is built), render (pure) and preflight (at submit).

The Launch's one stage is the follower (`follow`), run by the usual detached supervisor: it submits
sbatch.sh with `sbatch`, streams the job's output into the job's log, follows its state and cancels
it on stop. Plain sbatch/squeue/scontrol rather than submitit: submitit pickles a Python callable,
while our launch is an argv that must run the same on every node.
"""

from __future__ import annotations

import shutil
import sys

from nbtoolkit import backends
from nbtoolkit.backends import LaunchError
from nbtoolkit.backends.slurm.sbatch import SCRIPT, node_spec, slurm_files
from nbtoolkit.backends.slurm.settings import SlurmSpec
from nbtoolkit.launching.launch import Launch, Stage
from nbtoolkit.lineage.chains import local_folder
from nbtoolkit.spec import RunSpec

#: an earlier job's model: the cluster's nodes read nbtoolkit's job folders (its launch runs in one)
model_input = local_folder

NAME = "slurm"
FOLLOWER = "nbtoolkit.backends.slurm.follow"
#: a stop waits until Slurm reports the job gone (scancel's SIGTERM, KillWait, then SIGKILL on every node)
STOP_GRACE_S = 120.0
#: what runs inside an allocation: the processes our local launchers start on each node
ACCELERATORS = ("cpu", "cuda")
LAUNCHERS = ("auto", "local", "torchrun", "deepspeed")
NO_SBATCH = (
    "hardware.target 'slurm' submits with sbatch, which is not on PATH here; run nbtoolkit on a Slurm "
    "login node, or install Slurm's client tools (e.g. apt-get install slurm-client)"
)


def validate(spec: RunSpec) -> str | None:
    """What keeps the spec from running as a Slurm job (or a slurm block that would be ignored), one sentence."""
    hw = spec.hardware
    if hw.target != NAME:
        return (
            f"the slurm block applies to hardware.target 'slurm' (it is '{hw.target}'); "
            "set hardware.target: slurm or remove the block"
        )
    if hw.accelerator not in ACCELERATORS:
        return f"hardware.accelerator '{hw.accelerator}' cannot run under hardware.target 'slurm'; use cuda or cpu"
    if spec.launcher not in LAUNCHERS:
        return f"launcher '{spec.launcher}' cannot run under hardware.target 'slurm'; use auto, torchrun or deepspeed"
    if hw.node_rank != 0:
        return "hardware.node_rank is set by Slurm on each node (SLURM_NODEID); remove it"
    return None


def saves_checkpoints(spec: RunSpec) -> bool:
    """The training program saves checkpoints: train.save_steps, or a save strategy given through extra."""
    return spec.train.save_steps is not None or spec.extra.get("save_strategy", "no") != "no"


def notes(spec: RunSpec) -> list[str]:
    found = [
        f"submitted with `sbatch {SCRIPT}` and followed by {FOLLOWER}; node.sh is what each node runs",
        "the job folder and this Python environment must be on a filesystem every node sees, at the same paths",
    ]
    if (spec.slurm or SlurmSpec()).requeue:
        if spec.script is not None:
            found.append("requeued after preemption, your script starts again: resume from its own checkpoints")
        elif not saves_checkpoints(spec):
            found.append("requeue without train.save_steps: a requeued job restarts from step 0 (it has no checkpoint)")
        else:
            found.append("a requeued job resumes from its last checkpoint in output/")
    return found


def render(spec: RunSpec) -> Launch:
    local_spec = node_spec(spec)
    local = backends.select(local_spec).render(local_spec)
    found = notes(spec)
    stage = Stage(
        name="train",
        argv=[sys.executable, "-m", FOLLOWER, "--script", SCRIPT],
        metrics_from_log=local.main_stage.metrics_from_log,
        stop_grace_s=STOP_GRACE_S,
    )
    return Launch(
        backend=NAME,
        stages=[stage],
        env={"PYTHONUNBUFFERED": "1"},
        files=slurm_files(spec, local, found),
        notes=found,
        nodes=spec.hardware.nodes,
    )


def preflight(spec: RunSpec) -> None:
    if shutil.which("sbatch") is None:
        raise LaunchError(NO_SBATCH)
