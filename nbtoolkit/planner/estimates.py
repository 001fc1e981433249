"""The planner's answers as data: the setup and workload it estimates, and the Estimate and Plan it gives, with the
words people read (summary lines, the won't-fit sentence). The arithmetic is nbtoolkit.planner.plan's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict

from nbtoolkit.hardware import catalog
from nbtoolkit.planner.shapes import ModelShape
from nbtoolkit.spec_parts.blocks import Offload, Precision

GiB = 2**30
#: allocator fragmentation and short-lived buffers, as a fraction of what is estimated
FRAGMENTATION = 0.10
#: CUDA context, cuBLAS/NCCL workspaces and similar, per device
RUNTIME_RESERVE_BYTES = 1 * GiB


@dataclass(frozen=True)
class Setup:
    """One way to run the spec's training: the spec's own, or an alternative."""

    instance: catalog.InstanceType | None
    device: catalog.Accelerator | None
    devices_per_node: int
    nodes: int
    precision: Precision
    deepspeed: bool
    zero_stage: int
    offload_optimizer: Offload
    offload_params: Offload
    checkpointing: bool
    batch_size: int
    grad_accum: int
    #: the spec's hardware.accelerator (cpu, cuda, neuron): what the program loads the weights for
    accelerator_kind: str = "cpu"

    @property
    def devices(self) -> int:
        return self.devices_per_node * self.nodes

    @property
    def weight_bytes(self) -> int:
        return 2 if self.deepspeed and self.precision != "fp32" else 4

    @property
    def activation_bytes(self) -> int:
        return 4 if self.precision == "fp32" else 2

    def describe(self) -> str:
        where = f"{self.devices_per_node} x {self.device.name}" if self.device else f"{self.devices} x cpu"
        if self.instance:
            where += f" on {self.nodes} x {self.instance.name}" if self.nodes > 1 else f" on {self.instance.name}"
        return f"{where}, {self.precision}, {self.strategy_label()}, batch {self.batch_size}/device" + (
            ", gradient checkpointing" if self.checkpointing else ""
        )

    def strategy_label(self) -> str:
        if not self.deepspeed:
            return "data parallel" if self.devices > 1 else "one device"
        offloaded = [
            name
            for name, where in (("optimizer", self.offload_optimizer), ("weights", self.offload_params))
            if where != "none"
        ]
        where = self.offload_params if self.offload_params != "none" else self.offload_optimizer
        return f"DeepSpeed ZeRO-{self.zero_stage}" + (f" + {' and '.join(offloaded)} on {where}" if offloaded else "")


@dataclass(frozen=True)
class Workload:
    """What does not change between setups: the model, sequence lengths, data and pace."""

    shape: ModelShape
    input_length: int
    target_length: int
    samples: int | None
    epochs: float
    max_steps: int | None
    utilisation: float
    hourly_price_override: float | None
    adapter: str = "none"  # the spec's adapter.type: lora and qlora freeze the base (qlora in 4 bits)
    trainable_params: int | None = None  # with an adapter: the adapters' parameters
    #: the instance's catalog (cloud) price applies; not on a cluster whose nodes the catalog does not price (Slurm)
    catalog_price: bool = True
    #: sequences each sample trains on (preference: chosen and rejected)
    sequences_per_sample: int = 1
    #: a frozen reference copy of the model is kept (DPO/KTO full fine-tune, GRPO with a KL term)
    reference_model: bool = False
    #: GRPO: the parameters of its reward models (reward.models), frozen, loaded in the policy's load dtype
    reward_model_params: int = 0
    #: GRPO: the tokens (prompt + completion) of each sampled completion, whose KV cache generation holds
    generated_tokens: int = 0
    #: the task feeds images through the vision tower (vision-chat); a text task loads a vision-language model's tower
    #: (transformers 5's Auto classes map gemma3 to Gemma3ForConditionalGeneration / Gemma3Model) but never runs it
    reads_images: bool = False
    #: a full fine-tune's parameters the program freezes (vision-chat: the vision tower; its projector trains)
    frozen_params: int = 0

    @property
    def trained_params(self) -> int:
        """The parameters that get gradients, optimizer states and an all-reduce."""
        return self.shape.params - self.frozen_params if self.trainable_params is None else self.trainable_params


def hours_text(hours: float) -> str:
    return f"{hours * 60:.0f} min" if hours < 1 else f"{hours:,.1f} h"


def usd_text(usd: float) -> str:
    return f"${usd:,.2f}" if usd < 10 else f"${usd:,.0f}"


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True)


class MemoryBreakdown(_Model):
    """Bytes per device by kind, and on the host per node."""

    weights: int
    gradients: int
    optimizer: int
    gathered: int
    activations: int
    overhead: int
    host: int
    model_states_ideal: int  # the ZeRO paper's partitioning: a lower bound for the first four

    def in_gib(self) -> str:
        """'weights 2.6, gradients 5.2, ... GiB': the parts of the per-device total that are not zero."""
        parts = ("weights", "gradients", "optimizer", "gathered", "activations", "overhead")
        return ", ".join(f"{name} {getattr(self, name) / GiB:.1f}" for name in parts if getattr(self, name)) + " GiB"


class StepParts(_Model):
    """Seconds per optimizer step: matmuls, collectives (overlapped with them), offload (added)."""

    compute: float
    communication: float
    offload: float
    total: float
    communication_modelled: bool

    def in_words(self) -> str:
        collectives = (
            f"collectives {self.communication:.2f} s, overlapped"
            if self.communication_modelled
            else "collectives not modelled: the catalog has no link bandwidth for this instance"
        )
        offload = f", offload and CPU Adam {self.offload:.2f} s" if self.offload else ""
        return f"compute {self.compute:.2f} s, {collectives}{offload}"


class Estimate(_Model):
    """One setup's memory, fit, time and cost."""

    instance_type: str | None
    accelerator: str | None
    devices_per_node: int
    nodes: int
    precision: str
    strategy: str
    zero_stage: int
    offload_optimizer: str
    offload_params: str
    gradient_checkpointing: bool
    batch_size: int
    grad_accum: int
    memory: MemoryBreakdown
    per_device_bytes: int
    device_memory_bytes: int | None
    host_bytes: int
    host_memory_bytes: int | None
    device_fits: bool | None
    host_fits: bool | None
    fits: bool | None
    max_batch_size: int | None
    step_seconds: float | None
    step: StepParts | None  # what the modelled step time is made of (None when measured)
    samples_per_second: float | None
    hours: float | None
    hourly_price_usd: float | None
    cost_usd: float | None
    problems: list[str] = []
    changes: list[str] = []
    description: str = ""
    adapter: str = "none"  # lora or qlora: a frozen base with trainable adapters

    def line(self) -> str:
        """One short line: setup, fit, hours and cost."""
        fit = {True: "fits", False: "does not fit", None: "fit unknown"}[self.fits]
        memory = f"{self.per_device_bytes / GiB:.1f}" + (
            f"/{self.device_memory_bytes / GiB:.0f} GiB" if self.device_memory_bytes else " GiB"
        )
        when = f", {hours_text(self.hours)}" if self.hours is not None else ""
        cost = f", {usd_text(self.cost_usd)}" if self.cost_usd is not None else ""
        return f"{self.description}: {memory}, {fit}{when}{cost}"


class Plan(Estimate):
    """The spec's setup estimated, with the formulas used and ranked alternatives."""

    model: str
    params: int
    #: a vision-language model's vision tower and projector (among params), and the tokens an image becomes (0: the
    #: task reads no images)
    vision_params: int = 0
    image_tokens: int = 0
    params_exact: bool
    model_source: str
    input_length: int
    target_length: int
    flops_per_sample: float
    tokens_per_step: int
    train_samples: int | None
    epochs: float
    steps: int | None
    utilisation: float
    throughput_source: str
    confident: bool
    formula: str
    assumptions: list[str]
    alternatives: list[Estimate]
    #: when a full fine-tune does not fit: LoRA (and QLoRA on CUDA) on the spec's own hardware
    adapter_alternatives: list[Estimate] = []
    price_note: str
    #: why the run has no cost when it has a time (a Slurm cluster without hardware.hourly_price_usd)
    price_unknown: str | None = None
    trainable_params: int
    #: what launch refuses in the spec's inputs (nbtoolkit.inputs.preflight: model, data, adapter targets), filled by
    #: nbtoolkit.plan; the arithmetic does not read the data
    refused: list[str] = []
    #: what launch lets through but the job will not do as written (chat rows max_length cuts before their reply)
    warned: list[str] = []
    #: what launch moves before the job starts (a SageMaker job's local data files, uploaded to its bucket)
    transfers: list[str] = []

    def summary_lines(self) -> list[str]:
        """Short lines for people: what was planned, memory and fit, time and cost, best alternatives."""
        size = f"{self.params / 1e9:.2f}B" if self.params >= 1e8 else f"{self.params / 1e6:.1f}M"
        trained = (
            ""
            if self.adapter == "none"
            else (
                f" ({self.adapter.replace('q', 'Q').replace('lora', 'LoRA')}: {self.trainable_params / 1e6:.2f}M trainable)"
            )
        )
        tower = f"{self.vision_params / 1e6:,.1f}M" if self.vision_params >= 1e5 else f"{self.vision_params / 1e3:.1f}k"
        reads = (
            f"{self.image_tokens} tokens per image"
            if self.image_tokens
            else "loaded but unused: this task reads no images"
        )
        vision = f" (vision tower and projector {tower}; {reads})" if self.vision_params else ""
        lines = [f"{self.model}: {size} parameters{vision}{trained}; {self.description}"]
        if self.device_memory_bytes:
            fit = "fits" if self.device_fits else "does NOT fit"
            lines.append(
                f"memory per device: {self.per_device_bytes / GiB:.1f} of {self.device_memory_bytes / GiB:.1f}"
                f" GiB, {fit}; largest batch that fits: {self.max_batch_size}"
            )
        else:
            lines.append(
                f"memory per device: {self.per_device_bytes / GiB:.1f} GiB (device memory unknown: "
                "set hardware.instance_type to check the fit)"
            )
        lines.append(f"  {self.memory.in_gib()}")
        host = f"host memory per node: {self.host_bytes / GiB:.1f} GiB"
        if self.host_memory_bytes:
            host += f" of {self.host_memory_bytes / GiB:.0f} GiB" + ("" if self.host_fits else ", does NOT fit")
        lines.append(host)
        if self.hours is not None:
            lines.append(
                f"time: {self.steps:,} steps x {self.step_seconds:.2f} s = {hours_text(self.hours)} "
                f"({self.throughput_source})"
            )
            if self.step is not None:
                lines.append(f"  per step: {self.step.in_words()}")
        elif self.steps is not None:  # the steps are known; the pace of this hardware is not
            lines.append(
                f"time: unknown for {self.steps:,} steps (no modelled pace for this hardware: set "
                "hardware.instance_type, or run it once and plan again with that job's measured pace)"
            )
        else:
            lines.append("time: unknown (give dataset.max_train_samples or train.max_steps)")
        if self.cost_usd is not None:
            lines.append(
                f"cost: {usd_text(self.cost_usd)} at ${self.hourly_price_usd:,.2f}/h x {self.nodes} ({self.price_note})"
            )
        elif self.price_unknown:
            lines.append(f"cost: unknown ({self.price_unknown})")
        lines.extend(f"problem: {problem}" for problem in self.problems)
        lines.extend(f"refused before launch: {problem}" for problem in self.refused)
        lines.extend(f"warning: {warning}" for warning in self.warned)
        lines.extend(f"before the job starts: {transfer}" for transfer in self.transfers)
        better: list[Estimate] = []
        seen: set[tuple[str | None, int]] = set()
        for alt in self.alternatives:  # the best setup of each instance type and count
            where = (alt.instance_type, alt.nodes)
            cheaper = not self.fits or self.cost_usd is None or (alt.cost_usd or math.inf) < self.cost_usd
            if alt.fits and alt.cost_usd is not None and cheaper and where not in seen and len(better) < 3:
                seen.add(where)
                better.append(alt)
        if better:
            if not self.fits:
                lines.append("setups that fit:")
            elif self.cost_usd is None:  # nothing to be cheaper than: what they cost, not a saving
                lines.append("setups that fit, with a known price (this one's is not known):")
            else:
                lines.append("cheaper setups that fit:")
            lines.extend(f"  {alt.line()}" for alt in better)
        if not self.fits:
            best = self.best_on_same_hardware()
            for here in ([best] if best else []) + self.fitting_on_same_hardware(adapter=True):  # LoRA and QLoRA
                lines.append(f"on this hardware: {', '.join(here.changes)} -> {here.line()}")
        return lines

    def wont_fit_message(self) -> str | None:
        """One sentence for a launch that will not fit (None when it fits or the plan is unsure)."""
        if not self.confident or self.fits is not False:
            return None
        if self.device_fits is False and self.device_memory_bytes:
            problem = (
                f"predicted {self.per_device_bytes / GiB:.1f} GiB per device for {self.model} "
                f"({self.description}) exceeds the {self.device_memory_bytes / GiB:.1f} GiB of one "
                f"{self.accelerator}"
            )
        elif self.host_memory_bytes:  # the devices fit: the host is what is short
            problem = (
                f"predicted {self.host_bytes / GiB:.0f} GiB of host memory per node for {self.model} "
                f"exceeds the {self.host_memory_bytes / GiB:.0f} GiB of one {self.instance_type}"
            )
        else:  # a fit is judged only against a known memory
            return None
        hints = []
        here = self.best_on_same_hardware()
        if here is not None:
            hints.append(f"on this hardware try {', '.join(here.changes)}")
        adapted = self.best_on_same_hardware(adapter=True)
        if adapted is not None:
            hints.append(
                f"adapters fit on this hardware: {', '.join(adapted.changes)} "
                f"({adapted.per_device_bytes / GiB:.1f} GiB per device)"
            )
        cheapest = next((alt for alt in self.alternatives if alt.fits), None)
        if cheapest is not None and cheapest is not here:
            hints.append(f"the cheapest setup that fits is {', '.join(cheapest.changes)}")
        hint = "; ".join(["", *hints])
        return f"{problem}{hint} (see `nbtoolkit plan`), or force the launch (--force, force=True)"

    def best_on_same_hardware(self, *, adapter: bool = False) -> Estimate | None:
        """The cheapest alternative that fits on the spec's own instance type and count: one that trains as the spec
        does, or with `adapter` one that trains LoRA/QLoRA adapters instead (offered when a full fine-tune does not
        fit)."""
        return next(iter(self.fitting_on_same_hardware(adapter=adapter)), None)

    def fitting_on_same_hardware(self, *, adapter: bool = False) -> list[Estimate]:
        """Every alternative that fits on the spec's own instance type and count, cheapest first."""
        return [
            alt
            for alt in (self.adapter_alternatives if adapter else self.alternatives)
            if alt.fits and alt.instance_type == self.instance_type and alt.nodes == self.nodes
        ]

    def to_json_dict(self) -> dict:
        return self.model_dump(mode="json")
