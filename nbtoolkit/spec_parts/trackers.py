"""Experiment trackers a spec can report to: where each run goes, and what the training program sets for it.

Light (no tracker imported): the launch checks the packages, the training program sets the
environment, and `nbtoolkit show` / `%job` print the locations, all from the same functions.
Every tracker writes into the job directory (wandb offline, trackio locally), so nothing leaves
the machine unless the user syncs it.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from nbtoolkit.spec import RunSpec

#: the job directory's folder that holds every tracker's files
TRACKING_DIR = "tracking"
#: tracker -> the module it needs, and how to install it
PACKAGES: dict[str, tuple[str, str]] = {
    "tensorboard": ("tensorboard", "pip install 'nbtoolkit-finetune[trackers]'"),
    "mlflow": ("mlflow", "pip install 'nbtoolkit-finetune[trackers]'"),
    "wandb": ("wandb", "pip install wandb"),
    "trackio": ("trackio", "pip install trackio"),
}


def run_name(spec: RunSpec, job_dir: Path) -> str:
    """The run's name in every tracker: the spec's display name and the job id (the job directory's name)."""
    return f"{spec.display_name}-{job_dir.name}"


def locations(spec: RunSpec, job_dir: Path) -> dict[str, str]:
    """Tracker -> where its run is (a folder, or a tracking URI: MLflow's local store is SQLite, its file store
    being in maintenance mode since MLflow 3)."""
    tracking = job_dir.resolve() / TRACKING_DIR
    where = {
        "tensorboard": str(tracking / "tensorboard"),
        "mlflow": f"sqlite:///{tracking / 'mlflow.db'}",
        "wandb": str(tracking / "wandb"),
        "trackio": str(tracking / "trackio"),
    }
    return {tracker: where[tracker] for tracker in spec.report_to}


def environment(spec: RunSpec, job_dir: Path) -> dict[str, str]:
    """What the trackers' Trainer callbacks read: their directories, offline modes, the experiment's name."""
    where = locations(spec, job_dir)
    settings = {
        "tensorboard": {"TENSORBOARD_LOGGING_DIR": where.get("tensorboard", "")},
        "mlflow": {"MLFLOW_TRACKING_URI": where.get("mlflow", ""), "MLFLOW_EXPERIMENT_NAME": spec.display_name},
        "wandb": {"WANDB_MODE": "offline", "WANDB_DIR": where.get("wandb", ""), "WANDB_PROJECT": spec.display_name},
        "trackio": {"TRACKIO_DIR": where.get("trackio", ""), "TRACKIO_PROJECT": spec.display_name},
    }
    return {key: value for tracker in spec.report_to for key, value in settings[tracker].items()}


def check_installed(spec: RunSpec) -> str | None:
    """One sentence naming the first tracker whose package is missing, or None."""
    for tracker in spec.report_to:
        module, install = PACKAGES[tracker]
        if importlib.util.find_spec(module) is None:
            return f"report_to names {tracker}, whose package is not installed here; {install}, or remove it"
    return None


def describe(spec: RunSpec, job_dir: Path) -> list[str]:
    """Lines for `nbtoolkit show` and `%job`: the run name and each tracker's location."""
    where = locations(spec, job_dir)
    if not where:
        return []
    return [f"run name {run_name(spec, job_dir)}", *(f"{tracker} {place}" for tracker, place in where.items())]
