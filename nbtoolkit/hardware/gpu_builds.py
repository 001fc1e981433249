"""Which PyTorch CUDA builds run on which GPU, so no job bills for an instance its image has no kernels for.

The facts, each with its source, are in `gpu_builds.yaml` beside this module: the compute capability of
each GPU, and the architectures each PyTorch release x CUDA wheel is compiled for. A torch 2.7 + CUDA 12.8
image on a V100 (sm_70) starts, bills, and fails at its first CUDA kernel; this module says so first.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict, field_validator

from nbtoolkit.hardware.catalog import read_yaml

BUILDS_FILE = Path(__file__).with_name("gpu_builds.yaml")
#: a Hugging Face or PyTorch DLC tag: `<torch>-transformers<x>-gpu-<py>-cu<NNN>-...` or `<torch>-gpu-<py>-cu<NNN>-...`
IMAGE_TAG = re.compile(r":(?P<torch>\d+\.\d+(?:\.\d+)?)-.*?\bcu(?P<cuda>\d{3,})\b")

Capability = tuple[int, int]


def capability(text: str) -> Capability:
    """'8.6' -> (8, 6)."""
    major, minor = text.split(".")
    return int(major), int(minor)


def cuda_of(container_version: str | None) -> str | None:
    """'cu128-ubuntu22.04' -> '12.8' (None when the image names no CUDA)."""
    found = re.match(r"cu(\d+)(\d)\b", container_version or "")
    return f"{found.group(1)}.{found.group(2)}" if found else None


def _release(version: str) -> tuple[int, int]:
    major, minor = re.findall(r"\d+", version)[:2]
    return int(major), int(minor)


class Build(BaseModel):
    """One PyTorch wheel line: releases `pytorch[0]`..`pytorch[1]` for the CUDA versions in `cuda`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    pytorch: tuple[str, str]
    cuda: tuple[str, ...]
    archs: str
    source: str

    @field_validator("cuda", mode="before")
    @classmethod
    def _listed(cls, value: str | list[str]) -> list[str]:
        return [value] if isinstance(value, str) else value

    def covers(self, pytorch: str, cuda: str | None) -> bool:
        low, high = (_release(end) for end in self.pytorch)
        return low <= _release(pytorch) <= high and (cuda is None or cuda in self.cuda)

    def runs_on(self, gpu: Capability) -> bool:
        """A cubin of the same major and no higher minor, or PTX at or below the GPU's capability."""
        for arch in self.archs.split(";"):
            target = capability(arch.removesuffix("+PTX"))
            if target[0] == gpu[0] and target[1] <= gpu[1]:
                return True
            if arch.endswith("+PTX") and target <= gpu:
                return True
        return False


@cache
def _data() -> dict:
    return read_yaml(BUILDS_FILE)


@cache
def builds() -> tuple[Build, ...]:
    return tuple(Build(**row) for row in _data()["builds"])


def gpu_capability(gpu: str) -> Capability:
    """The compute capability of a GPU the table knows (V100 -> (7, 0))."""
    return capability(_data()["architectures"][gpu]["sm"])


def sm_name(gpu: str) -> str:
    major, minor = gpu_capability(gpu)
    return f"sm_{major}{minor}"


def gpus() -> list[str]:
    return list(_data()["architectures"])


def pytorch_runs_on(pytorch: str, cuda: str | None, gpu: str) -> bool:
    """Whether the PyTorch `pytorch` wheel for `cuda` has kernels for `gpu`.

    With the CUDA unknown, every build of that release must have them; a build the table does not
    know counts as not running (better refused here than failed after the instances bill).
    """
    rows = [build for build in builds() if build.covers(pytorch, cuda)]
    return bool(rows) and all(build.runs_on(gpu_capability(gpu)) for build in rows)


def build_known(pytorch: str, cuda: str | None) -> bool:
    """Whether the table has a row for this PyTorch release and CUDA (else nothing says what it runs on)."""
    return any(build.covers(pytorch, cuda) for build in builds())


def image_build(image_uri: str) -> tuple[str, str | None] | None:
    """(PyTorch release, CUDA) read from a DLC image's tag, or None when the tag does not say."""
    found = IMAGE_TAG.search(image_uri)
    if not found:
        return None
    return found.group("torch"), cuda_of(f"cu{found.group('cuda')}")
