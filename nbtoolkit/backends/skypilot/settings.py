"""The `skypilot:` block of a spec: what only a SkyPilot run needs (light: the spec gathers it at import)."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, ConfigDict, Field

from nbtoolkit.spec_parts.block import SpecBlock

#: GPU per node as SkyPilot names it: `A100:8`, `H100-80GB:8`, `L4`
ACCELERATORS = re.compile(r"[A-Za-z][A-Za-z0-9-]*(:\d+)?")
#: the stores SkyPilot mounts from, by URL scheme
BUCKET_SCHEMES = ("s3://", "gs://", "r2://", "cos://", "oci://", "https://")


def _name_and_count(value: str) -> str:
    if not ACCELERATORS.fullmatch(value):
        raise ValueError(f"{value!r} is not a GPU name and count; write NAME:COUNT, e.g. A100:8")
    return value


#: GPUs per node as SkyPilot writes them
Gpus = Annotated[str, AfterValidator(_name_and_count)]


class Resources(SpecBlock):
    """One choice of where to run: SkyPilot tries a task's choices in the order given."""

    accelerators: Gpus = Field(description="GPU name and count per node, e.g. A100:8")
    cloud: str | None = Field(None, description="e.g. aws, gcp, azure, kubernetes; any enabled cloud when omitted")
    region: str | None = Field(None, description="a region of that cloud; any when omitted")


class SkyPilotSpec(SpecBlock):
    """Settings only a SkyPilot run needs; nodes and GPUs per node live in hardware. Titled fields are the form's."""

    model_config = ConfigDict(title="SkyPilot")

    accelerators: Gpus | None = Field(
        None,
        title="Accelerators",
        description="GPU name and count per node, e.g. A100:8; default from hardware.instance_type or hardware.devices",
    )
    cloud: str | None = Field(
        None, title="Cloud", description="e.g. aws, gcp, azure, kubernetes; any enabled cloud when omitted"
    )
    region: str | None = Field(None, title="Region", description="a region of skypilot.cloud; any when omitted")
    use_spot: bool = Field(False, title="Spot instances", description="spot instances: cheaper, may be preempted")
    fallbacks: list[Resources] = Field(
        default_factory=list, description="tried in order when the first choice has no capacity"
    )
    bucket: str | None = Field(
        None,
        title="Checkpoint bucket",
        description="s3://... or gs://...: mounted at the run's output folder, so a "
        "recovered job resumes from its last checkpoint",
    )
    bucket_mode: Literal["MOUNT_CACHED", "MOUNT"] = Field(
        "MOUNT_CACHED",
        description="how SkyPilot mounts the bucket: MOUNT_CACHED writes to local disk and uploads in the "
        "background, MOUNT writes straight to the bucket",
    )
    managed: bool = Field(True, description="a managed job, which SkyPilot recovers after a preemption")
