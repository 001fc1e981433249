"""What each training process runs: nbtoolkit's own program, or the user's script."""

from __future__ import annotations

from pathlib import Path

from nbtoolkit.spec import RunSpec

SPEC_FILE = "spec.json"
#: a program that fails for a reason it can explain prints this, then one sentence (the job's message)
ERROR_PREFIX = "[nbtoolkit] error:"

#: env every training process gets: unbuffered logs, no telemetry, no tokenizer fork warnings
BASE_ENV = {
    "PYTHONUNBUFFERED": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "TOKENIZERS_PARALLELISM": "false",
}


def program_args(spec: RunSpec, spec_file: str = SPEC_FILE) -> list[str]:
    """Arguments after the interpreter (or launcher): `-m nbtoolkit.train --spec spec.json` or the script."""
    if spec.script is None:
        return ["-m", "nbtoolkit.train", "--spec", spec_file]
    return [str(Path(spec.script.path).expanduser().resolve()), *spec.script.args]


def writes_own_metrics(spec: RunSpec) -> bool:
    """nbtoolkit.train writes metrics.jsonl itself; a user script's log must be parsed."""
    return spec.script is None


def spec_files(spec: RunSpec) -> dict[str, str]:
    """The spec in full (defaults included), so a job reruns the same even if defaults change."""
    return {SPEC_FILE: spec.model_dump_json(indent=2)}
