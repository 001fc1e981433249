"""The `skypilot:` block of a spec: what only a SkyPilot run needs, and its one-sentence problems.

The spec carries the block as plain data (the core imports no backend); this module reads it into
`SkyPilotSpec` and names the first bad field, so the form, `nbtoolkit plan` and a launch all say
the same sentence.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from nbtoolkit import catalog
from nbtoolkit.spec import RunSpec

#: GPU per node as SkyPilot names it: `A100:8`, `H100-80GB:8`, `L4`
ACCELERATORS = re.compile(r"[A-Za-z][A-Za-z0-9-]*(:\d+)?")
#: the stores SkyPilot mounts from, by URL scheme
BUCKET_SCHEMES = ("s3://", "gs://", "r2://", "cos://", "oci://", "https://")
#: the catalog's device names where SkyPilot's differ (A100 means the 40 GB one to both)
SKYPILOT_GPU_NAMES = {"A100-40GB": "A100", "H100-80GB": "H100"}


def _name_and_count(value: str) -> str:
    if not ACCELERATORS.fullmatch(value):
        raise ValueError(f"{value!r} is not a GPU name and count; write NAME:COUNT, e.g. A100:8")
    return value


#: GPUs per node as SkyPilot writes them
Gpus = Annotated[str, AfterValidator(_name_and_count)]


class _Block(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Resources(_Block):
    """One choice of where to run: SkyPilot tries a task's choices in the order given."""

    accelerators: Gpus = Field(description="GPU name and count per node, e.g. A100:8")
    cloud: str | None = Field(None, description="e.g. aws, gcp, azure, kubernetes; any enabled cloud when omitted")
    region: str | None = None


class SkyPilotSpec(_Block):
    """Settings only a SkyPilot run needs; nodes and GPUs per node live in hardware."""

    accelerators: Gpus | None = Field(None, description="GPU name and count per node, e.g. A100:8; default from "
                                     "hardware.instance_type or hardware.devices")
    cloud: str | None = None
    region: str | None = None
    use_spot: bool = False
    fallbacks: list[Resources] = Field(default_factory=list, description="tried in order when the first choice "
                                       "has no capacity")
    bucket: str | None = Field(None, description="s3://... or gs://...: mounted at the run's output folder, so a "
                               "recovered job resumes from its last checkpoint")
    bucket_mode: Literal["MOUNT_CACHED", "MOUNT"] = "MOUNT_CACHED"
    managed: bool = Field(True, description="a managed job, which SkyPilot recovers after a preemption")


def problem(spec: RunSpec) -> str | None:
    """The first thing wrong with a SkyPilot spec, as one sentence naming its field; None if it can run."""
    try:
        block = settings(spec)
    except ValidationError as exc:
        return _explain(exc)
    hardware = spec.hardware
    if hardware.accelerator != "cuda":
        return (f"hardware.accelerator '{hardware.accelerator}' does not run on SkyPilot here; a SkyPilot target "
                "runs on cloud GPUs: set hardware.accelerator: cuda")
    if spec.script is not None:
        return ("script is not shipped to SkyPilot nodes (they get the job's folder only); remove script to run "
                "nbtoolkit's own training program")
    if not block.managed:
        return ("skypilot.managed false is not supported: nbtoolkit launches managed jobs (they recover after a "
                "preemption); remove managed or set it true")
    if block.region and not block.cloud:
        return f"skypilot.region '{block.region}' needs skypilot.cloud (a region belongs to one cloud), e.g. aws"
    if block.bucket and not block.bucket.startswith(BUCKET_SCHEMES):
        return (f"skypilot.bucket '{block.bucket}' is not a bucket URL; give e.g. s3://my-bucket/checkpoints "
                "or gs://my-bucket/checkpoints")
    first = accelerators(spec, block)
    if first is None:
        return ("skypilot.accelerators is missing; name the GPU and count per node, e.g. A100:8, or a "
                "hardware.instance_type the catalog knows")
    choices = {"skypilot.accelerators": first,
               **{f"skypilot.fallbacks.{index}.accelerators": fallback.accelerators
                  for index, fallback in enumerate(block.fallbacks)}}
    for field, gpus in choices.items():  # the batch size, the plan and the DeepSpeed hostfile count on devices
        count = int(gpus.partition(":")[2] or 1)
        if count != hardware.devices:
            return (f"{field} '{gpus}' gives {count} GPU(s) per node, but hardware.devices is {hardware.devices}; "
                    "make them agree")
    return None


def settings(spec: RunSpec) -> SkyPilotSpec:
    """The spec's block (defaults when it has none)."""
    return SkyPilotSpec.model_validate(spec.skypilot or {})


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


def _explain(exc: ValidationError) -> str:
    """One sentence for the first pydantic error of the block, named by its field."""
    error = exc.errors()[0]
    location = ".".join(["skypilot", *(str(part) for part in error["loc"])])
    if error["type"] == "value_error":  # our validators' sentences start with the value
        return f"{location} {error['ctx']['error']}"
    if error["type"] == "extra_forbidden":
        known = Resources if "fallbacks" in location else SkyPilotSpec
        return f"{location} is not a known field; valid fields are {', '.join(known.model_fields)}"
    return f"{location}: {error.get('input')!r} is not valid ({error['msg'].lower()})"
