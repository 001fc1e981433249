"""The planner's arithmetic in words: the formula a Plan shows for its setup, and what every estimate assumes."""

from __future__ import annotations

from nbtoolkit.hardware.precision import DTYPE_BYTES, load_dtype
from nbtoolkit.planner import memory, timing
from nbtoolkit.planner.estimates import FRAGMENTATION, RUNTIME_RESERVE_BYTES, GiB, Setup, Workload


def _full_fine_tune_states(setup: Setup, work: Workload) -> str:
    """A full fine-tune's model states: weights count every parameter Ψ; gradients and optimizer states the trainable
    ones, Ψ_t = Ψ less what the program freezes (vision-chat: the vision tower), as memory.py counts them."""
    w = setup.weight_bytes
    frozen = bool(work.frozen_params)

    def term(weights: int, trained: int, per: str = "") -> list[str]:
        """`weights`Ψ + `trained`Ψ_t (one term when nothing is frozen), `per` device or whole."""
        if not frozen:
            return [f"{weights + trained}Ψ{per}"] if weights + trained else []
        return ([f"{weights}Ψ{per}"] if weights else []) + ([f"{trained}Ψ_t{per}"] if trained else [])

    if not setup.deepspeed:
        return (
            f"{' + '.join(term(4, 12))} (PyTorch AdamW: fp32 weights 4 + gradients 4 + two moments 8; not partitioned)"
        )
    optimizer_on_host = setup.offload_optimizer != "none"
    if setup.zero_stage >= 3:
        weights = 0 if setup.offload_params != "none" else w
        terms = [f"{2 * w}L", *term(weights, 0 if optimizer_on_host else 16, "/N")]
    elif optimizer_on_host:
        terms = [f"{w}Ψ"]
    elif setup.zero_stage == 2:
        terms = [f"{w}Ψ", *term(0, 16 + w, "/N")]
    else:  # gradients whole; stage 0 keeps the optimizer whole too
        terms = [*term(w, w), *term(0, 16, "/N" if setup.zero_stage == 1 else "")]
    trainable = "; Ψ_t the trainable parameters, the frozen Ψ - Ψ_t weights only" if frozen else ""
    return (
        f"{' + '.join(terms)} (DeepSpeed 0.19.8 ZeRO-{setup.zero_stage} estimator, {w}-byte weights{trainable}; "
        "ZeRO paper (2+2+12)Ψ partitioning shown as the ideal)"
    )


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
    else:
        states = _full_fine_tune_states(setup, work)
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
    if work.reward_model_params:
        states += " + reward models' weights Ψ_r in the policy's load dtype (frozen)"
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
