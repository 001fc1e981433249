"""What each training process runs: nbtoolkit's own program, or the user's script."""

from __future__ import annotations

import os
from pathlib import Path

from nbtoolkit.launching.runtime import SPEC_FILE
from nbtoolkit.spec import RunSpec
from nbtoolkit.spec_parts.blocks import ScriptSpec

#: env every training process gets: unbuffered logs, no telemetry, no tokenizer fork warnings. MLflow (3.x) looks
#: up config.mlflow-telemetry.io unless told not to; DO_NOT_TRACK is "true", not "1": MLflow compares it to "true"
BASE_ENV = {
    "PYTHONUNBUFFERED": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "MLFLOW_DISABLE_TELEMETRY": "true",
    "DO_NOT_TRACK": "true",
    "TOKENIZERS_PARALLELISM": "false",
}


#: the Trainer's option for a checkpoint to continue from (a TrainingArguments field: HfArgumentParser scripts take it)
TRAINER_RESUME_ARG = "--resume_from_checkpoint"

#: holds the sitecustomize.py that adds nbtoolkit's metrics callback to every Trainer a user's script creates
AUTOLOG_BOOT = Path(__file__).resolve().parent.parent / "train" / "autolog_boot"


def launch_env(spec: RunSpec) -> dict[str, str]:
    """BASE_ENV, and for a user's script: autolog first on PYTHONPATH; on several CPU ranks the CPU backend
    (a Trainer without `use_cpu` would otherwise train each rank alone, `distributed training: False`).
    Not under DeepSpeed: the variable turns DeepSpeed off (the spec warns to pass --use_cpu instead)."""
    if spec.script is None:
        return dict(BASE_ENV)
    inherited = os.environ.get("PYTHONPATH")
    env = {**BASE_ENV, "PYTHONPATH": os.pathsep.join([str(AUTOLOG_BOOT), *([inherited] if inherited else [])])}
    if spec.world_size > 1 and spec.hardware.accelerator == "cpu" and spec.parallelism.strategy != "deepspeed":
        env["ACCELERATE_USE_CPU"] = "true"
    return env


def run_dir(spec: RunSpec) -> str | None:
    """Where the stages run: a user's script where it is launched from (its relative paths mean what they
    mean there), nbtoolkit's own program in the job folder (None)."""
    return os.getcwd() if spec.script is not None else None


def program_args(spec: RunSpec, spec_file: str = SPEC_FILE) -> list[str]:
    """Arguments after the interpreter (or launcher): `-m nbtoolkit.train --spec spec.json` or the script,
    with the checkpoint to resume from when the spec names one (`latest`: the script finds its own)."""
    if spec.script is None:
        return ["-m", "nbtoolkit.train", "--spec", spec_file]
    resume = (
        [] if spec.resume in (None, "latest") else [script_resume_arg(spec.script) or TRAINER_RESUME_ARG, spec.resume]
    )
    return [str(Path(spec.script.path).expanduser().resolve()), *spec.script.args, *resume]


def script_resume_arg(script: ScriptSpec) -> str | None:
    """The option a user's script takes a checkpoint with: `script.resume_arg`, else the Trainer's own when the
    script's source reads it (HfArgumentParser scripts such as run_glue.py); None: it has no way to resume."""
    if script.resume_arg:
        return script.resume_arg
    try:
        source = Path(script.path).expanduser().read_text(errors="replace")
    except OSError:
        return None
    return TRAINER_RESUME_ARG if TRAINER_RESUME_ARG.lstrip("-") in source else None


def writes_own_metrics(spec: RunSpec) -> bool:
    """nbtoolkit.train writes metrics.jsonl itself; a user script's log must be parsed."""
    return spec.script is None
