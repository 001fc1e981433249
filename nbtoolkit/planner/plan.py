"""spec -> Plan: memory per device, whether it fits, time, cost, and cheaper setups that fit.

`plan(spec)` reads the model's shape and the hardware from the catalog, estimates the spec's
own setup, then the same run on the alternatives (instance type, node count, precision, ZeRO
stage, offload, gradient checkpointing), ranked by estimated cost. The answers' types and words are
nbtoolkit.planner.estimates; the arithmetic told in words, nbtoolkit.planner.explain.
"""

from __future__ import annotations

import math
from dataclasses import replace

from nbtoolkit.hardware import catalog
from nbtoolkit.hardware.precision import DTYPE_BYTES, load_dtype
from nbtoolkit.planner import memory, timing
from nbtoolkit.planner.estimates import (
    FRAGMENTATION,
    RUNTIME_RESERVE_BYTES,
    Estimate,
    MemoryBreakdown,
    Plan,
    Setup,
    StepParts,
    Workload,
    hours_text,
    usd_text,
)
from nbtoolkit.planner.explain import assumptions, formula
from nbtoolkit.planner.shapes import ModelShape, model_shape, train_samples
from nbtoolkit.spec import RunSpec, load_spec
from nbtoolkit.spec_parts.adapters import target_modules
from nbtoolkit.spec_parts.blocks import AdapterSpec, Offload, Precision
from nbtoolkit.tasks import TASKS, TaskWorkload, hook

#: the most alternatives a Plan keeps (ranked); the rest are dropped
MAX_ALTERNATIVES = 40
#: batch sizes above this are not searched
MAX_BATCH = 4096


# -- estimating one setup ------------------------------------------------------------------------


def _model_states(setup: Setup, work: Workload) -> memory.ModelStates:
    """The policy's states (with its frozen reference copy), and the frozen reward models a GRPO run scores with."""
    states = _trained_states(setup, work)
    if not work.reward_model_params:
        return states
    shards = setup.devices if setup.deepspeed and setup.zero_stage == 3 else 1
    loaded = load_dtype(setup.precision, setup.accelerator_kind, work.adapter)
    frozen = memory.reference_model_bytes(work.reward_model_params, DTYPE_BYTES.get(loaded, 2), shards)
    return replace(states, weights=states.weights + frozen, ideal=states.ideal + frozen)


def _trained_states(setup: Setup, work: Workload) -> memory.ModelStates:
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
        # the program casts to bf16
        return memory.full_bf16_model_states(
            shape.params, trainable=work.trained_params, devices_per_node=setup.devices_per_node
        )
    if not setup.deepspeed:
        return memory.torch_model_states(
            shape.params, trainable=work.trained_params, devices_per_node=setup.devices_per_node
        )
    return memory.deepspeed_model_states(
        shape.params,
        shape.largest_layer_params,
        trainable=work.trained_params,
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
    flops = timing.flops_per_sample(
        shape, work.input_length, work.target_length, setup.checkpointing, images=work.reads_images
    )
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


def _price_unknown(setup: Setup, work: Workload) -> str | None:
    """Why the plan has no cost (None: it has one, or no instance to price)."""
    if work.hourly_price_override is not None:
        return None
    if not work.catalog_price:
        return CLUSTER_PRICE_UNKNOWN
    if setup.instance is not None and setup.instance.hourly_price_usd is None:
        return f"the catalog has no price for {setup.instance.name}; set hardware.hourly_price_usd to count it"
    return None


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


def reward_model_params(name: str) -> int:
    """A reward model's parameters: its config's, with a one-output score head in place of an untied LM head."""
    shape = model_shape(name)
    return shape.params - shape.untied_head_params + shape.hidden_size * bool(shape.untied_head_params)


def _workload(spec: RunSpec, shape: ModelShape, *, dataset_size: int | None, utilisation: float) -> Workload:
    samples = train_samples(spec)
    if dataset_size is not None:
        samples = min(dataset_size, spec.dataset.max_train_samples or dataset_size)
    is_seq2seq = shape.architecture == "encoder-decoder"
    adapter = spec.adapter
    modules = target_modules(adapter) if adapter else ()
    task = TASKS[spec.task]
    extra = hook(task.workload)(spec) if task.workload else TaskWorkload()
    completion = extra.completion_tokens
    return Workload(
        shape=shape,
        input_length=spec.dataset.max_length + completion,
        target_length=spec.dataset.max_target_length if is_seq2seq else 0,
        samples=samples,
        epochs=spec.train.epochs,
        max_steps=spec.train.max_steps,
        utilisation=utilisation,
        hourly_price_override=spec.hardware.hourly_price_usd,
        adapter=adapter.type if adapter else "none",
        trainable_params=memory.lora_params(shape, adapter.r, modules) if adapter else None,
        catalog_price=spec.hardware.priced_by_catalog,
        sequences_per_sample=task.sequences_per_sample,
        reference_model=extra.reference_model
        and adapter is None,  # with an adapter the reference is the base, adapters off
        reward_model_params=sum(reward_model_params(name) for name in extra.reward_models),
        generated_tokens=spec.dataset.max_length + completion if completion else 0,
        reads_images=extra.frozen_vision_tower,
        frozen_params=shape.vision_params - shape.projector_params if extra.frozen_vision_tower else 0,
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
    flops = timing.flops_per_sample(
        shape, work.input_length, work.target_length, setup.checkpointing, images=work.reads_images
    )
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
        vision_params=shape.vision_params,
        image_tokens=shape.image_tokens if work.reads_images else 0,
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
        price_unknown=_price_unknown(setup, work),
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
