"""Accelerators and AWS instance types: devices, memory, bf16, peak throughput and $/hour.

The numbers live in `catalog.yaml` next to this module, each with its source and date; this
module only reads and looks them up. `ml.` names are SageMaker's view of the same hardware,
priced at SageMaker's rates.
"""

from __future__ import annotations

import difflib
from functools import cache
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict

CATALOG_FILE = Path(__file__).with_name("catalog.yaml")
SAGEMAKER_PREFIX = "ml."

Precision = Literal["fp32", "fp16", "bf16"]


class CatalogError(KeyError):
    """A name the catalog does not know; the message lists close names."""

    def __str__(self) -> str:  # KeyError would quote the sentence
        return str(self.args[0])


class _Entry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PeakTflops(_Entry):
    fp32: float
    fp16: float | None = None
    bf16: float | None = None


class Accelerator(_Entry):
    """One device: what a single training process drives."""

    name: str
    #: the hardware.accelerator value that drives it
    kind: Literal["cuda", "neuron"] = "cuda"
    memory_gib: float
    usable_gib: float | None = None
    bf16: bool
    peak_tflops: PeakTflops
    #: the NVIDIA GPU (a key of gpu_builds.yaml: which PyTorch builds run on it); None for NeuronCores
    gpu: str | None = None
    source: str
    note: str | None = None

    @property
    def memory_bytes(self) -> int:
        """What a program can allocate (datasheet capacity less any ECC reservation)."""
        return int((self.usable_gib or self.memory_gib) * 2**30)

    def peak_flops(self, precision: Precision) -> float:
        """Peak dense FLOP/s for matmuls in this precision (bf16 without support counts as fp32)."""
        tflops = getattr(self.peak_tflops, precision) or self.peak_tflops.fp32
        return tflops * 1e12


class InstanceType(_Entry):
    """An instance type as named (EC2 or SageMaker `ml.`), with the price of that service."""

    name: str
    accelerator: str
    devices: int
    vcpus: int
    memory_gib: float
    device_link_gbs: float | None
    host_link_gbs: float | None
    network_gbps: float | None
    price_usd: float | None
    sagemaker_price_usd: float | None

    @property
    def sagemaker(self) -> bool:
        return self.name.startswith(SAGEMAKER_PREFIX)

    @property
    def hourly_price_usd(self) -> float | None:
        return self.sagemaker_price_usd if self.sagemaker else self.price_usd

    @property
    def memory_bytes(self) -> int:
        return int(self.memory_gib * 2**30)

    @property
    def device(self) -> Accelerator:
        return accelerator(self.accelerator)


def read_yaml(path: Path) -> Any:
    """A YAML data file, parsed with libyaml when PyYAML has it (ten times faster than pure Python)."""
    return yaml.load(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


@cache
def _data() -> dict:
    return read_yaml(CATALOG_FILE)


def _key(name: str) -> str:
    return "".join(ch for ch in name.lower() if ch.isalnum())


def _unknown(kind: str, name: str, known: list[str]) -> CatalogError:
    close = difflib.get_close_matches(name, known, n=3, cutoff=0.5)
    hint = f"did you mean {', '.join(close)}?" if close else f"known: {', '.join(known)}"
    return CatalogError(f"{kind} '{name}' is not in the catalog; {hint}")


@cache
def accelerators() -> tuple[Accelerator, ...]:
    return tuple(Accelerator(name=name, **entry) for name, entry in _data()["accelerators"].items())


def accelerator(name: str) -> Accelerator:
    """Look up a device by name, ignoring case and punctuation ("a100 40gb" finds A100-40GB)."""
    known = accelerators()
    for entry in known:
        if _key(entry.name) == _key(name):
            return entry
    raise _unknown("accelerator", name, [entry.name for entry in known])


def instance_names(sagemaker: bool = False) -> list[str]:
    names = list(_data()["instances"])
    return [SAGEMAKER_PREFIX + name for name in names] if sagemaker else names


def instance(name: str) -> InstanceType:
    """Look up an EC2 (`p4d.24xlarge`) or SageMaker (`ml.p4d.24xlarge`) instance type."""
    entries = _data()["instances"]
    base = name.strip().lower().removeprefix(SAGEMAKER_PREFIX)
    if base not in entries:
        raise _unknown("instance type", name, instance_names(name.startswith(SAGEMAKER_PREFIX)))
    return InstanceType(name=name.strip().lower(), **entries[base])


def hourly_price(instance_type: str) -> float | None:
    """On-demand USD per hour for one instance (EC2 or SageMaker by its name).

    None when the catalog has no price for it, or does not know the type at all: callers that
    show costs (job listings, SageMaker jobs) then show none rather than fail.
    """
    try:
        return instance(instance_type).hourly_price_usd
    except CatalogError:
        return None


def prices_note() -> str:
    """Where and when the prices hold, in one line (shown next to every cost)."""
    prices = _data()["prices"]
    return f"{prices['kind']}, {prices['region']}, as of {prices['as_of']}"
