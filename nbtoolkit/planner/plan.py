"""spec -> Plan: memory per device, whether it fits, time, cost, and cheaper setups that fit.

`plan(spec)` reads the model's shape and the hardware from the catalog, estimates the spec's
own setup, then the same run on the alternatives (instance type, node count, precision, ZeRO
stage, offload, gradient checkpointing), ranked by estimated cost.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from pydantic import BaseModel, ConfigDict

from nbtoolkit import catalog
from nbtoolkit.adapters import target_modules
from nbtoolkit.planner import memory, timing
from nbtoolkit.planner.shapes import ModelShape, model_shape, train_samples
from nbtoolkit.precision import DTYPE_BYTES, load_dtype
from nbtoolkit.spec import AdapterSpec, Offload, Precision, RewardSpec, RunSpec, load_spec

GiB = 2**30
#: allocator fragmentation and short-lived buffers, as a fraction of what is estimated
FRAGMENTATION = 0.10
#: CUDA context, cuBLAS/NCCL workspaces and similar, per device
RUNTIME_RESERVE_BYTES = 1 * GiB
#: the most alternatives a Plan keeps (ranked); the rest are dropped
MAX_ALTERNATIVES = 40
#: batch sizes above this are not searched
MAX_BATCH = 4096


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
    #: GRPO: the tokens (prompt + completion) of each sampled completion, whose KV cache generation holds
    generated_tokens: int = 0

    @property
    def trained_params(self) -> int:
        """The parameters that get gradients, optimizer states and an all-reduce."""
        return self.shape.params if self.trainable_params is None else self.trainable_params


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
    #: what launch refuses in the spec's inputs (nbtoolkit.preflight: model, data, adapter targets), filled by
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
        lines = [f"{self.model}: {size} parameters{trained}; {self.description}"]
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
            lines.append("cheaper setups that fit:" if self.fits else "setups that fit:")
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


# -- estimating one setup ------------------------------------------------------------------------


def _model_states(setup: Setup, work: Workload) -> memory.ModelStates:
    shape = work.shape
    if work.adapter != "none":
        return memory.adapter_model_states(
            shape.params,
            work.trained_params,
            shape.quantized_params,
            base_dtype=load_dtype(setup.precision, setup.accelerator_kind, work.adapter),
            devices_per_node=setup.devices_per_node,
        )
    states = _policy_states(setup, work)
    if not work.reference_model:
        return states
    shards = setup.devices if setup.deepspeed and setup.zero_stage == 3 else 1
    reference = memory.reference_model_bytes(shape.params, setup.weight_bytes if setup.deepspeed else 4, shards)
    return replace(states, weights=states.weights + reference, ideal=states.ideal + reference)


def _policy_states(setup: Setup, work: Workload) -> memory.ModelStates:
    """The trained model's weights, gradients and optimizer states (full fine-tune)."""
    shape = work.shape
    if not setup.deepspeed and setup.precision == "bf16" and setup.device and setup.device.kind == "neuron":
        return memory.full_bf16_model_states(shape.params, setup.devices_per_node)  # the program casts to bf16
    if not setup.deepspeed:
        return memory.torch_model_states(shape.params, setup.devices_per_node)
    return memory.deepspeed_model_states(
        shape.params,
        shape.largest_layer_params,
        weight_bytes=setup.weight_bytes,
        stage=setup.zero_stage,
        devices_per_node=setup.devices_per_node,
        nodes=setup.nodes,
        offload_optimizer=setup.offload_optimizer,
        offload_params=setup.offload_params,
    )


def _per_device(states_bytes: float, activations: float) -> tuple[int, int]:
    """Total per device and the overhead in it, for model states plus a batch's activations."""
    overhead = (states_bytes + activations) * FRAGMENTATION + RUNTIME_RESERVE_BYTES
    return int(states_bytes + activations + overhead), int(overhead)


def _activation_per_sample(setup: Setup, work: Workload) -> float:
    """Activations kept for backward, for each sequence of a sample, plus a completion's KV cache (GRPO)."""
    kept = memory.activation_bytes(
        work.shape,
        input_length=work.input_length,
        target_length=work.target_length,
        activation_bytes=setup.activation_bytes,
        checkpointing=setup.checkpointing,
    )
    cache = memory.kv_cache_bytes(work.shape, work.generated_tokens, setup.activation_bytes)
    return kept * work.sequences_per_sample + cache


def _max_batch(states_bytes: float, per_sample: float, capacity: int) -> int:
    """Largest batch whose total fits in `capacity` (total is linear in the batch size)."""
    room = (capacity - RUNTIME_RESERVE_BYTES) / (1 + FRAGMENTATION) - states_bytes
    return max(0, min(MAX_BATCH, math.floor(room / per_sample))) if per_sample > 0 else MAX_BATCH


def _problems(setup: Setup, shape: ModelShape) -> list[str]:
    found = []
    if setup.device and setup.precision == "bf16" and not setup.device.bf16:
        found.append(
            f"{setup.device.name} has no bfloat16 support, and the Trainer refuses bf16 on it; "
            "use fp32 (or fp16 for models that do not overflow)"
        )
    if setup.device and setup.precision == "fp16" and shape.model_type in ("t5", "mt5", "umt5"):
        found.append("T5 models overflow in fp16 (NaN loss); use bf16 or fp32")
    return found


def estimate(setup: Setup, work: Workload, *, measured: float | None = None) -> Estimate:
    """Memory, fit, time and cost of one setup; `measured` samples/s replaces the modelled pace."""
    shape = work.shape
    states = _model_states(setup, work)
    per_sample = _activation_per_sample(setup, work)
    activations = per_sample * setup.batch_size
    per_device, overhead = _per_device(states.device, activations)
    capacity = setup.device.memory_bytes if setup.device else None
    host_capacity = setup.instance.memory_bytes if setup.instance else None
    device_fits = per_device <= capacity if capacity else None
    host_fits = states.host <= host_capacity if host_capacity else None
    fits = None if device_fits is None else device_fits and host_fits is not False
    step_seconds = samples_per_second = hours = cost = step = None
    flops = timing.flops_per_sample(shape, work.input_length, work.target_length, setup.checkpointing)
    global_batch = setup.batch_size * setup.devices * setup.grad_accum
    if measured:
        step_seconds = global_batch / measured
    elif setup.device:
        step = timing.step_time(
            hardware=_hardware(setup, setup.device),
            flops_per_micro_batch=flops * setup.batch_size,
            grad_accum=setup.grad_accum,
            utilisation=work.utilisation,
            params=work.trained_params,
            weight_bytes=setup.weight_bytes if setup.deepspeed else 4,
            zero_stage=setup.zero_stage,
            offload_optimizer=setup.offload_optimizer != "none",
            offload_params=setup.offload_params != "none",
        )
        step_seconds = step.total
    steps = _steps(setup, work)
    price = _price(setup, work)
    if step_seconds is not None:
        samples_per_second = global_batch / step_seconds
        if steps is not None:
            hours = steps * step_seconds / 3600
            cost = hours * price * setup.nodes if price is not None else None
    return Estimate(
        instance_type=setup.instance.name if setup.instance else None,
        accelerator=setup.device.name if setup.device else None,
        devices_per_node=setup.devices_per_node,
        nodes=setup.nodes,
        precision=setup.precision,
        strategy="deepspeed" if setup.deepspeed else "data-parallel",
        zero_stage=setup.zero_stage,
        offload_optimizer=setup.offload_optimizer,
        offload_params=setup.offload_params,
        gradient_checkpointing=setup.checkpointing,
        batch_size=setup.batch_size,
        grad_accum=setup.grad_accum,
        memory=MemoryBreakdown(
            weights=int(states.weights),
            gradients=int(states.gradients),
            optimizer=int(states.optimizer),
            gathered=int(states.gathered),
            activations=int(activations),
            overhead=overhead,
            host=int(states.host),
            model_states_ideal=int(states.ideal),
        ),
        per_device_bytes=per_device,
        device_memory_bytes=capacity,
        host_bytes=int(states.host),
        host_memory_bytes=host_capacity,
        device_fits=device_fits,
        host_fits=host_fits,
        fits=fits,
        max_batch_size=_max_batch(states.device, per_sample, capacity) if capacity else None,
        step_seconds=step_seconds,
        step=StepParts(**vars(step)) if step else None,
        samples_per_second=samples_per_second,
        hours=hours,
        hourly_price_usd=price,
        cost_usd=cost,
        problems=_problems(setup, shape),
        description=setup.describe(),
    )


def _hardware(setup: Setup, device: catalog.Accelerator) -> timing.Hardware:
    instance = setup.instance
    return timing.Hardware(
        peak_flops=device.peak_flops(setup.precision),
        devices_per_node=setup.devices_per_node,
        nodes=setup.nodes,
        device_link_gbs=instance.device_link_gbs if instance else None,
        network_gbps=instance.network_gbps if instance else None,
        host_link_gbs=instance.host_link_gbs if instance else None,
    )


def _steps(setup: Setup, work: Workload) -> int | None:
    """Optimizer steps the Trainer runs: max_steps, else epochs x batches per epoch / accumulation."""
    if work.max_steps:
        return work.max_steps
    if work.samples is None:
        return None
    batches = math.ceil(work.samples / (setup.batch_size * setup.devices))
    return math.ceil(work.epochs * batches / setup.grad_accum)


CLUSTER_PRICE_UNKNOWN = (
    "the catalog prices cloud instances, not this cluster's nodes; set hardware.hourly_price_usd "
    "(per node-hour) to count it"
)


def _price(setup: Setup, work: Workload) -> float | None:
    if work.hourly_price_override is not None:
        return work.hourly_price_override
    return setup.instance.hourly_price_usd if setup.instance and work.catalog_price else None


# -- from a spec ---------------------------------------------------------------------------------


def _spec_setup(spec: RunSpec) -> tuple[Setup, list[str]]:
    hw, par = spec.hardware, spec.parallelism
    problems: list[str] = []
    instance = None
    if hw.instance_type:
        try:
            instance = catalog.instance(hw.instance_type)
        except catalog.CatalogError as exc:
            problems.append(f"hardware.instance_type: {exc}")
    device = None
    if instance is not None and (hw.accelerator != "cpu" or hw.target == "sagemaker"):
        device = instance.device
        if hw.accelerator != "cpu" and device.kind != hw.accelerator:
            problems.append(
                f"hardware.instance_type {instance.name} has {device.name} devices, but "
                f"hardware.accelerator is '{hw.accelerator}'"
            )
    if instance is not None and hw.devices > instance.devices:
        problems.append(f"hardware.devices {hw.devices} is more than the {instance.devices} of a {instance.name}")
    setup = Setup(
        instance=instance,
        device=device,
        devices_per_node=hw.devices,
        nodes=hw.nodes,
        precision=spec.precision,
        deepspeed=par.strategy == "deepspeed",
        zero_stage=par.zero_stage,
        offload_optimizer=par.offload_optimizer,
        offload_params=par.offload_params,
        checkpointing=spec.gradient_checkpointing,
        batch_size=spec.train.batch_size,
        grad_accum=spec.train.grad_accum,
        accelerator_kind=hw.accelerator,
    )
    if par.tensor_parallel_degree > 1 or par.pipeline_parallel_degree > 1:
        problems.append("tensor/pipeline model parallelism is not modelled; the plan assumes data parallelism")
    return setup, problems


def _workload(spec: RunSpec, shape: ModelShape, *, dataset_size: int | None, utilisation: float) -> Workload:
    samples = train_samples(spec)
    if dataset_size is not None:
        samples = min(dataset_size, spec.dataset.max_train_samples or dataset_size)
    is_seq2seq = shape.architecture == "encoder-decoder"
    adapter = spec.adapter
    modules = target_modules(adapter) if adapter else ()
    reward = spec.reward or RewardSpec()
    grpo = spec.task == "grpo"
    with_reference = (
        spec.task == "preference" and (spec.preference is None or spec.preference.method in ("dpo", "kto"))
    ) or (grpo and reward.beta > 0)
    return Workload(
        shape=shape,
        input_length=spec.dataset.max_length + (reward.max_completion_length if grpo else 0),
        target_length=spec.dataset.max_target_length if is_seq2seq else 0,
        samples=samples,
        epochs=spec.train.epochs,
        max_steps=spec.train.max_steps,
        utilisation=utilisation,
        hourly_price_override=spec.hardware.hourly_price_usd,
        adapter=adapter.type if adapter else "none",
        trainable_params=memory.lora_params(shape, adapter.r, modules) if adapter else None,
        catalog_price=spec.hardware.priced_by_catalog,
        sequences_per_sample=2 if spec.task == "preference" else 1,
        reference_model=with_reference and adapter is None,  # with an adapter the reference is the base, adapters off
        generated_tokens=spec.dataset.max_length + reward.max_completion_length if grpo else 0,
    )


def plan(
    spec: RunSpec | dict | str,
    *,
    measured: float | None = None,
    measured_from: str | None = None,
    dataset_size: int | None = None,
    utilisation: float | None = None,
    alternatives: bool = True,
) -> Plan:
    """Plan a spec: memory per device and fit, time and cost, and ranked alternatives.

    `measured`: samples/s of a real run of this setup (all devices together, e.g. the Trainer's
    train_samples_per_second); it replaces the modelled pace, and the utilisation it implies is
    used for alternatives on the same accelerator; `measured_from` says where it comes from (past jobs).
    `dataset_size`: training examples per epoch
    when the spec's dataset size is not known offline. `utilisation`: fraction of peak FLOP/s.
    `alternatives=False` skips ranking other setups (a few hundred estimates).
    """
    spec = load_spec(spec)
    shape = model_shape(spec.model_name)
    setup, problems = _spec_setup(spec)
    assumed = utilisation or timing.DEFAULT_UTILISATION
    work = _workload(spec, shape, dataset_size=dataset_size, utilisation=assumed)
    flops = timing.flops_per_sample(shape, work.input_length, work.target_length, setup.checkpointing)
    source = f" over {measured_from}" if measured_from else ""
    if measured and setup.device:
        implied = measured * flops / (setup.devices * setup.device.peak_flops(setup.precision))
        throughput_source = f"measured {measured:,.1f} samples/s{source} (about {implied:.0%} of peak)"
        work = replace(work, utilisation=implied)
    elif measured:
        throughput_source = f"measured {measured:,.1f} samples/s{source}"
    else:
        throughput_source = f"assumed {assumed:.0%} of peak {setup.precision} FLOP/s"
    own = estimate(setup, work, measured=measured)
    others = [other for other in alternative_setups(setup, shape) if work.adapter == "none" or not other.deepspeed]
    ranked = _kept(rank(others, work, own=setup), own) if alternatives else []
    adapted = (
        _adapter_alternatives(setup, work) if alternatives and work.adapter == "none" and own.fits is False else []
    )
    return Plan(
        **{**own.model_dump(), "problems": problems + own.problems, "adapter": work.adapter},
        model=spec.model_name,
        params=shape.params,
        params_exact=shape.exact,
        model_source=shape.source,
        input_length=work.input_length,
        target_length=work.target_length,
        flops_per_sample=flops,
        tokens_per_step=setup.batch_size * setup.devices * setup.grad_accum * (work.input_length + work.target_length),
        train_samples=work.samples,
        epochs=work.epochs,
        steps=_steps(setup, work),
        utilisation=work.utilisation,
        throughput_source=throughput_source,
        confident=own.device_memory_bytes is not None and not problems,
        formula=formula(setup, work),
        assumptions=assumptions(),
        alternatives=ranked,
        adapter_alternatives=adapted,
        price_note=catalog.prices_note(),
        price_unknown=None if work.catalog_price or work.hourly_price_override is not None else CLUSTER_PRICE_UNKNOWN,
        trainable_params=work.trained_params,
    )


# -- alternatives --------------------------------------------------------------------------------


def alternative_setups(current: Setup, shape: ModelShape) -> list[Setup]:
    """Other instance types (same service and accelerator kind), node counts, precisions,
    ZeRO stages, offload and checkpointing, at the spec's batch size."""
    if current.device is None:
        return []
    neuron = current.device.kind == "neuron"
    sagemaker = bool(current.instance and current.instance.sagemaker)
    setups = []
    for name in catalog.instance_names(sagemaker=sagemaker):
        instance = catalog.instance(name)
        device = instance.device
        if device.kind != current.device.kind:
            continue
        for nodes in sorted({1, 2, current.nodes}):
            for precision in _precisions(device, shape):
                for deepspeed, stage, offload_optimizer, offload_params in _strategies(neuron):
                    for checkpointing in sorted({current.checkpointing, True}):
                        setups.append(
                            replace(
                                current,
                                instance=instance,
                                device=device,
                                devices_per_node=instance.devices,
                                nodes=nodes,
                                precision=precision,
                                deepspeed=deepspeed,
                                zero_stage=stage,
                                offload_optimizer=offload_optimizer,
                                offload_params=offload_params,
                                checkpointing=checkpointing,
                            )
                        )
    return [setup for setup in setups if setup != current]


def _adapter_alternatives(setup: Setup, work: Workload) -> list[Estimate]:
    """LoRA, and QLoRA where bitsandbytes runs (CUDA), on the spec's own hardware without DeepSpeed, at the adapter
    block's defaults: what people turn to when a full fine-tune does not fit their GPU."""
    defaults = AdapterSpec()
    plain = replace(setup, deepspeed=False, zero_stage=0, offload_optimizer="none", offload_params="none")
    found = []
    for kind in ("lora", "qlora") if setup.accelerator_kind == "cuda" else ("lora",):
        adapted = replace(
            work,
            adapter=kind,
            trainable_params=memory.lora_params(work.shape, defaults.r, target_modules(defaults)),
            reference_model=False,  # the reference is the base with the adapters off
        )
        result = estimate(plain, adapted)
        edits = [f"adapter.type {kind}", *changes(setup, plain)]
        found.append(
            result.model_copy(
                update={"adapter": kind, "changes": edits, "description": f"{result.description}, {kind}"}
            )
        )
    return found


def _precisions(device: catalog.Accelerator, shape: ModelShape) -> list[Precision]:
    found: list[Precision] = ["fp32", "bf16"] if device.bf16 else ["fp32"]
    if not device.bf16 and shape.model_type not in ("t5", "mt5", "umt5"):
        found.append("fp16")
    return found


def _strategies(neuron: bool) -> list[tuple[bool, int, Offload, Offload]]:
    """(deepspeed, zero stage, offload optimizer, offload weights); DeepSpeed does not run on Neuron."""
    found: list[tuple[bool, int, Offload, Offload]] = [(False, 0, "none", "none")]
    if not neuron:
        found += [(True, stage, "none", "none") for stage in (1, 2, 3)]
        found += [(True, stage, "cpu", "none") for stage in (2, 3)]
        found += [(True, 3, "cpu", "cpu")]
    return found


def rank(setups: list[Setup], work: Workload, *, own: Setup) -> list[Estimate]:
    """Estimate each setup at the spec's batch (or the largest that fits, if smaller), fitting and
    cheapest first."""
    estimates = []
    for setup in setups:
        first = estimate(setup, work)
        if not first.fits and first.max_batch_size and first.host_fits is not False:
            setup = replace(setup, batch_size=first.max_batch_size)
            first = estimate(setup, work)
        estimates.append(first.model_copy(update={"changes": changes(own, setup)}))
    estimates.sort(
        key=lambda alt: (
            not alt.fits,
            bool(alt.problems),
            alt.cost_usd is None,
            alt.cost_usd or 0.0,
            alt.hours or 0.0,
            alt.zero_stage,
        )
    )
    return estimates


def _kept(ranked: list[Estimate], own: Estimate) -> list[Estimate]:
    """The best MAX_ALTERNATIVES, plus the best few that fit on the spec's own hardware."""
    kept = ranked[:MAX_ALTERNATIVES]
    here = [
        alt
        for alt in ranked[MAX_ALTERNATIVES:]
        if alt.fits and alt.instance_type == own.instance_type and alt.nodes == own.nodes
    ]
    return kept + here[:3]


#: Setup attribute -> the spec field a person edits for it, and how its value is written there
SPEC_FIELDS = (
    ("instance", "hardware.instance_type", lambda instance: instance.name),
    ("nodes", "hardware.nodes", str),
    ("precision", "precision", str),
    ("deepspeed", "parallelism.strategy", lambda deepspeed: "deepspeed" if deepspeed else "ddp"),
    ("zero_stage", "parallelism.zero_stage", str),
    ("offload_optimizer", "parallelism.offload_optimizer", str),
    ("offload_params", "parallelism.offload_params", str),
    ("checkpointing", "train.gradient_checkpointing", lambda on: str(on).lower()),
    ("batch_size", "train.batch_size", str),
)


def changes(old: Setup, new: Setup) -> list[str]:
    """What differs, as the spec edits that make it."""
    return [
        f"{field} {written(getattr(new, attribute))}"
        for attribute, field, written in SPEC_FIELDS
        if getattr(old, attribute) != getattr(new, attribute)
    ]


# -- the words around the numbers ------------------------------------------------------------------


def formula(setup: Setup, work: Workload) -> str:
    """The formulas behind this setup's numbers, with Ψ parameters, L the largest layer, N devices."""
    shape = work.shape
    w = setup.weight_bytes
    if work.adapter == "qlora":
        states = (
            f"{memory.NF4_BYTES:.3f}Ψ_q + 4(Ψ - Ψ_q) + 16Ψ_a (frozen base: the blocks' linear layers Ψ_q in NF4 with "
            "double quantization, the rest (embeddings, output layer, norms) in fp32 as PEFT's "
            "prepare_model_for_kbit_training casts it; adapters Ψ_a in fp32 with gradients and AdamW moments)"
        )
    elif work.adapter == "lora":
        base_dtype = load_dtype(setup.precision, setup.accelerator_kind, "lora")
        states = (
            f"{DTYPE_BYTES[base_dtype]}Ψ + 16Ψ_a (frozen {base_dtype} base; adapters Ψ_a in fp32 with gradients and "
            "AdamW moments)"
        )
    elif not setup.deepspeed:
        states = "16Ψ (PyTorch AdamW: fp32 weights 4 + gradients 4 + two moments 8; not partitioned)"
    else:
        optimizer_on_host = setup.offload_optimizer != "none"
        weights_on_host = setup.offload_params != "none"
        if setup.zero_stage >= 3:
            partitioned = (0 if weights_on_host else w) + (0 if optimizer_on_host else 16)
            terms = [f"{2 * w}L"] + ([f"{partitioned}Ψ/N"] if partitioned else [])
        elif optimizer_on_host:
            terms = [f"{w}Ψ"]
        elif setup.zero_stage == 2:
            terms = [f"{w}Ψ", f"{16 + w}Ψ/N"]
        else:  # gradients whole; stage 0 keeps the optimizer whole too
            terms = [f"{2 * w}Ψ", "16Ψ/N" if setup.zero_stage == 1 else "16Ψ"]
        states = (
            f"{' + '.join(terms)} (DeepSpeed 0.19.8 ZeRO-{setup.zero_stage} estimator, {w}-byte weights; "
            "ZeRO paper (2+2+12)Ψ partitioning shown as the ideal)"
        )
    k = 8 if setup.checkpointing else 6
    tokens = "(Ψ_in·s_in + Ψ_tgt·s_tgt)" if shape.architecture == "encoder-decoder" else "Ψ_in·s"
    activations = (
        "per layer: norms + attention (11sh + 5as², Korthikanti et al. 2022, per-block) + FFN"
        + ("; checkpointed: layer inputs + one layer recomputed" if setup.checkpointing else "")
        + " + logits (e + 8)·s·V"
    )
    why = "6 + 2 for the recomputed forward" if k == 8 else "forward 2 + backward 4"
    if work.reference_model:
        states += f" + reference model {w if setup.deepspeed else 4}Ψ (frozen weights, no gradients or optimizer)"
    if work.sequences_per_sample > 1:
        activations += f", x{work.sequences_per_sample} sequences per sample (chosen and rejected)"
    if work.generated_tokens:
        activations += " + generation KV cache 2·layers·h·(s_prompt + s_completion)·e per completion"
    return (
        f"per device = (model states + batch x activations) x {1 + FRAGMENTATION:.2f} + "
        f"{RUNTIME_RESERVE_BYTES / GiB:.0f} GiB; model states = {states}; activations = {activations}; "
        f"FLOPs/sample = {k}·{tokens} ({why}); step = max(compute, collectives) + offload copies + CPU Adam; "
        "compute = FLOPs / (N · peak · utilisation)"
    )


def assumptions() -> list[str]:
    return [
        "optimizer AdamW (the Trainer's default)",
        (
            f"utilisation {timing.DEFAULT_UTILISATION:.0%} of peak dense FLOP/s unless measured; fp32 at the "
            "non-tensor-core peak (PyTorch leaves TF32 off)"
        ),
        (
            f"links at {timing.LINK_EFFICIENCY:.0%} of datasheet bandwidth; collectives overlap compute, "
            "offload copies and the CPU Adam step do not"
        ),
        f"CPU Adam at {timing.CPU_ADAM_PARAMS_PER_SECOND / 1e9:g} billion parameters/s per instance",
        (
            f"overhead {FRAGMENTATION:.0%} of the estimate (allocator fragmentation, buffers) + "
            f"{RUNTIME_RESERVE_BYTES / GiB:.0f} GiB per device (CUDA context, workspaces)"
        ),
        "sequences padded to dataset.max_length (and max_target_length): the worst case of dynamic padding",
        "ZeRO-3 models are built under zero.Init (host holds one layer per process while loading)",
        "host memory x1.5 (DeepSpeed's additional_buffer_factor); NVMe offload timed like CPU offload",
        (
            "without DeepSpeed (PyTorch, torch-xla on Neuron) weights and optimizer states stay fp32 (XLA_USE_BF16 "
            "would halve them)"
        ),
        (
            "adapters: the base is frozen but activations are kept as in a full fine-tune (gradients flow through "
            "every layer to the adapters); ZeRO partitioning of a frozen base is not modelled"
        ),
    ]


def fit_problem(spec: RunSpec | dict | str) -> str | None:
    """The sentence a launch shows when the plan is sure the spec will not fit, will not finish
    before SageMaker stops it at `sagemaker.max_run`, or will cost more than train.budget_usd; None otherwise.

    A model that cannot be sized offline, or hardware the catalog does not know, is no reason
    to stop a launch.
    """
    from nbtoolkit.planner.shapes import ModelShapeError

    spec = load_spec(spec)
    try:
        result = plan(spec)
    except ModelShapeError:
        return None
    return result.wont_fit_message() or _wont_finish_message(spec, result) or _over_budget_message(spec, result)


def _wont_finish_message(spec: RunSpec, result: Plan) -> str | None:
    if spec.sagemaker is None or spec.hardware.target != "sagemaker" or not result.confident or result.hours is None:
        return None
    limit_hours = spec.sagemaker.max_run / 3600
    if result.hours <= limit_hours:
        return None
    wait = " (and max_wait, for spot)" if spec.sagemaker.spot else ""
    return (
        f"the plan's {hours_text(result.hours)} of training exceed sagemaker.max_run "
        f"{hours_text(limit_hours)}, where SageMaker stops the job; raise max_run{wait} to at least "
        f"{math.ceil(result.hours * 3600 * 1.2)} seconds, or train less (train.max_steps), or force the launch "
        "(--force, force=True)"
    )


def _over_budget_message(spec: RunSpec, result: Plan) -> str | None:
    """The predicted cost against train.budget_usd, and the cheapest setup that fits both the model and the budget."""
    budget = spec.train.budget_usd
    if budget is None or result.cost_usd is None or result.cost_usd <= budget:
        return None
    within = next(
        (alt for alt in result.alternatives if alt.fits and alt.cost_usd is not None and alt.cost_usd <= budget), None
    )
    hint = (
        f"the cheapest setup that fits it is {', '.join(within.changes)} ({within.line()})"
        if within is not None
        else "no setup the planner knows trains it for that"
    )
    return (
        f"the plan predicts {usd_text(result.cost_usd)} for this run, over its train.budget_usd of "
        f"{usd_text(budget)}; {hint} (see `nbtoolkit plan`); or raise the budget, train less (train.max_steps), "
        "or force the launch (--force, force=True)"
    )
