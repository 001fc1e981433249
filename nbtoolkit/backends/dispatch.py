"""A spec's launch and this machine's checks of it, through the backend the registry selects.

Apart from the registry (`nbtoolkit.backends`) because these need what needs a RunSpec (credential
redaction, absolute paths, the tracker and adapter checks), while the registry is imported by the spec
itself as it is built: kept together, the two made an import circle.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from nbtoolkit.backends import LaunchError, select
from nbtoolkit.inputs.preflight import input_problems
from nbtoolkit.launching.credentials import credential_problem, redact_spec
from nbtoolkit.launching.launch import Launch
from nbtoolkit.launching.runtime import SPEC_FILE
from nbtoolkit.lineage.chains import job_refs
from nbtoolkit.spec import RunSpec
from nbtoolkit.spec_parts.adapters import missing_package
from nbtoolkit.spec_parts.paths import absolute_paths
from nbtoolkit.spec_parts.trackers import check_installed

__all__ = ["preflight", "render"]


def render(spec: RunSpec) -> Launch:
    """The spec's launch; its relative paths are taken from the caller's working directory (a job runs in its own)
    and credential values are redacted (a job gets them from the environment)."""
    if job_refs(spec):
        raise LaunchError(
            f"{job_refs(spec)[0]} names an earlier job, which is resolved as the run is launched or planned "
            "(nbtoolkit.launch, nbtoolkit run, nbtoolkit launch-files)"
        )
    shown = redact_spec(absolute_paths(spec))
    launch = select(spec).render(shown)
    # every job folder keeps its spec in full (defaults included): it reruns the same if defaults change
    return dataclasses.replace(launch, files={SPEC_FILE: shown.model_dump_json(indent=2), **launch.files})


def preflight(spec: RunSpec) -> None:
    """Raise LaunchError if this machine cannot start the spec (checked at submit, not at export): credentials,
    script and packages, the backend's own (a Trainium spec off Trainium is told so first), then its inputs
    (nbtoolkit.inputs.preflight: model, data, adapter targets)."""
    problem_here = credential_problem(spec)
    if problem_here:
        raise LaunchError(problem_here)
    if spec.script is not None and not Path(spec.script.path).expanduser().is_file():
        raise LaunchError(f"script.path {spec.script.path} does not exist; give the path of your training script")
    missing = missing_package(spec) or check_installed(spec)
    if missing:
        raise LaunchError(missing)
    select(spec).preflight(spec)
    inputs = input_problems(spec)
    if inputs:
        raise LaunchError(inputs[0])
