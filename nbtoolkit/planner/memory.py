"""Training memory per device: model states (ZeRO stage, offload, precision) and activations.

Model states follow DeepSpeed's own estimators (`estimate_zero2/3_model_states_mem_needs`,
DeepSpeed 0.19.8) for DeepSpeed runs, and plain PyTorch data parallel otherwise; the ZeRO
paper's ideal partitioning (Rajbhandari et al. 2020, Fig. 1) is kept alongside as the lower
bound. Activations follow Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large
Transformer Models", sec. 4.1), written per block so encoder-decoders, gated FFNs and attention
without a stored score matrix are counted as they run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from nbtoolkit.hardware.precision import DTYPE_BYTES
from nbtoolkit.planner.shapes import ModelShape
from nbtoolkit.spec_parts.adapters import ALL_LINEAR

Offload = Literal["none", "cpu", "nvme"]

#: DeepSpeed's `additional_buffer_factor` for host memory
HOST_BUFFER_FACTOR = 1.5
#: fp32 master weights (4) + AdamW's two fp32 moments (8): ZeRO's K for mixed-precision Adam
MIXED_PRECISION_OPTIMIZER_BYTES = 12
#: the fp32 gradient partition DeepSpeed keeps for the optimizer step
FP32_GRADIENT_BYTES = 4
#: QLoRA's NF4 weights with double quantization: 4 bits plus 0.127 bits of constants per parameter
#: (Dettmers et al. 2023, "QLoRA", sec. 3: blocks of 64, constants quantized in blocks of 256)
NF4_BYTES = (4 + 0.127) / 8


@dataclass(frozen=True)
class ModelStates:
    """Bytes of weights, gradients and optimizer states: per device, and on the host per node."""

    weights: float
    gradients: float
    optimizer: float
    gathered: float  # ZeRO-3: the largest layer gathered whole (weights + gradients) while in use
    host: float
    ideal: float  # per-device total under the ZeRO paper's partitioning (no buffers)

    @property
    def device(self) -> float:
        return self.weights + self.gradients + self.optimizer + self.gathered


def zero_paper_bytes(
    params: float,
    devices: int,
    stage: int,
    *,
    trainable: float | None = None,
    weight_bytes: int = 2,
    gradient_bytes: int = 2,
    optimizer_bytes: int = MIXED_PRECISION_OPTIMIZER_BYTES,
) -> float:
    """ZeRO paper, Fig. 1: (2 + 2 + K)Ψ, with the optimizer (stage >= 1), gradients (>= 2)
    and weights (3) partitioned over the devices. K = 12 for mixed-precision Adam. Frozen parameters
    have weights only: gradients and optimizer states count the `trainable` ones (default: all)."""
    trained = params if trainable is None else trainable
    return (
        weight_bytes * params / (devices if stage >= 3 else 1)
        + gradient_bytes * trained / (devices if stage >= 2 else 1)
        + optimizer_bytes * trained / (devices if stage >= 1 else 1)
    )


def full_bf16_model_states(params: float, *, trainable: float, devices_per_node: int) -> ModelStates:
    """Neuron in full bf16 (the model cast to bf16, as XLA_USE_BF16=1 did): weights, gradients and AdamW's two
    moments included (2 bytes each), with no fp32 master copy; frozen parameters have weights only."""
    return ModelStates(
        weights=2 * params,
        gradients=2 * trainable,
        optimizer=4 * trainable,
        gathered=0,
        host=_loading_host_bytes(params, devices_per_node),
        ideal=2 * params + 6 * trainable,
    )


def torch_model_states(params: float, *, trainable: float, devices_per_node: int) -> ModelStates:
    """PyTorch (DDP or one process), AdamW; autocast keeps fp32 weights whatever the precision. Frozen parameters
    (requires_grad False) have weights only: no gradient, and the Trainer gives AdamW only the trainable ones."""
    return ModelStates(
        weights=4 * params,
        gradients=4 * trainable,
        optimizer=8 * trainable,
        gathered=0,
        host=_loading_host_bytes(params, devices_per_node),
        ideal=4 * params + 12 * trainable,
    )


def deepspeed_model_states(
    params: float,
    largest_layer: float,
    *,
    trainable: float,
    weight_bytes: int,
    stage: int,
    devices_per_node: int,
    nodes: int,
    offload_optimizer: Offload = "none",
    offload_params: Offload = "none",
) -> ModelStates:
    """DeepSpeed ZeRO model states, as DeepSpeed 0.19.8's estimators count them.

    16-bit weights: ZeRO-1/2 `2Ψ + 18Ψ/N` (optimizer offload: `2Ψ`); ZeRO-3 `4L + 18Ψ/N`
    (optimizer offload: `4L + 2Ψ/N`; both offloaded: `4L`), L the largest layer. fp32 weights
    (weight_bytes 4) double the 16-bit terms. Stage 0 is ZeRO-2's count on one device; stage 1
    keeps the 16-bit gradients whole. Host per node, x1.5: offloaded states (16Ψ, 18Ψ with the
    weights), else the fp32 model each process loads (4Ψ, 4L under ZeRO-3's zero.Init).

    Frozen parameters (Ψ - Ψ_t) have weights only: DeepSpeed's ZeRO optimizer partitions, and keeps gradients and
    fp32 states for, the optimizer's parameter groups, which the Trainer fills with the trainable ones; so every
    gradient and optimizer term above counts Ψ_t, the trainable parameters, and the weight terms Ψ.
    """
    devices = devices_per_node * nodes
    optimizer_on_host = offload_optimizer != "none"
    weights_on_host = offload_params != "none"
    shards = devices if stage >= 1 else 1
    weights = 0.0 if weights_on_host else weight_bytes * params / (devices if stage >= 3 else 1)
    if optimizer_on_host:
        gradients = optimizer = 0.0
    else:
        half_gradients = 0.0 if stage >= 3 else weight_bytes * trainable / (devices if stage == 2 else 1)
        gradients = half_gradients + FP32_GRADIENT_BYTES * trainable / shards
        optimizer = MIXED_PRECISION_OPTIMIZER_BYTES * trainable / shards
    gathered = 2 * weight_bytes * largest_layer if stage >= 3 else 0.0
    # bytes offloaded to the host, per node
    offloaded = (FP32_GRADIENT_BYTES + MIXED_PRECISION_OPTIMIZER_BYTES if optimizer_on_host else 0) * trainable + (
        weight_bytes * params if weights_on_host else 0
    )
    if "nvme" in (offload_optimizer, offload_params):
        offloaded = 0  # states live on the NVMe path; the host keeps buffers only
    if offloaded and stage < 3:  # ZeRO-2 offload: every process also loads the fp32 model
        host = max(4 * devices_per_node * params, offloaded) * HOST_BUFFER_FACTOR
    elif offloaded:
        host = offloaded / nodes * HOST_BUFFER_FACTOR
    else:
        host = _loading_host_bytes(largest_layer if stage >= 3 else params, devices_per_node)
    ideal = zero_paper_bytes(
        params,
        devices,
        stage,
        trainable=trainable,
        weight_bytes=weight_bytes,
        gradient_bytes=weight_bytes,
        optimizer_bytes=MIXED_PRECISION_OPTIMIZER_BYTES if weight_bytes == 2 else 8,
    )
    return ModelStates(
        weights=weights, gradients=gradients, optimizer=optimizer, gathered=gathered, host=host, ideal=ideal
    )


#: projections that compute queries, keys and values in one matrix (their output is 3x the attention width)
FUSED_QKV = ("c_attn", "query_key_value", "qkv_proj", "Wqkv")
#: model families whose attention computes q, k and v in one of FUSED_QKV
FUSED_QKV_FAMILIES = ("gpt2", "gpt_neox", "falcon", "bloom", "phi3")


def lora_params(shape: ModelShape, rank: int, modules: tuple[str, ...] | list[str] | str) -> int:
    """Trainable LoRA parameters: r x (inputs + outputs) per wrapped projection in every block.

    Named modules are attention projections (hidden -> attention width, 3x when fused) in every attention block
    (an encoder-decoder's decoder layers have two). `all-linear` wraps every block's attention (q, k, v and output,
    or the fused qkv and output) and feed-forward (2 matrices, 3 when gated) projections, and the decoder's
    cross-attention. Grouped-query attention's k and v are counted at the full width: an upper bound.
    """
    blocks = shape.layers + 2 * shape.decoder_layers
    h, inner = shape.hidden_size, shape.attention_dim
    if modules == ALL_LINEAR:
        fused = shape.model_type in FUSED_QKV_FAMILIES
        attention = (h + 3 * inner) + (inner + h) if fused else 4 * (h + inner)
        feed_forward = (3 if shape.gated_ffn else 2) * (h + shape.ffn_dim)
        return rank * (blocks * attention + (shape.layers + shape.decoder_layers) * feed_forward)
    per_block = sum(h + inner * (3 if name in FUSED_QKV else 1) for name in modules)
    return blocks * rank * per_block


def adapter_model_states(
    params: float, trainable: float, quantized_params: float, *, base_dtype: str, devices_per_node: int
) -> ModelStates:
    """A frozen base and trainable adapters (PyTorch, one process per device): the base's weights only, in the dtype
    nbtoolkit.hardware.precision loads it in, and 16 bytes per trainable parameter (fp32 weight 4 + gradient 4 + AdamW's two
    moments 8).

    QLoRA: bitsandbytes quantizes only the blocks' linear layers (`quantized_params`): transformers keeps the output
    layer, tied weights and every non-linear module (embeddings, norms) unquantized, and PEFT's
    `prepare_model_for_kbit_training` then casts all of those from bf16 to fp32 (4 bytes each; a 7B model with an
    untied 152k vocabulary has 1.1B of them: 4 GiB). Host: the weights each process loads; QLoRA quantizes shard
    by shard onto the device, so the host holds about the loaded model (NF4 and bf16)."""
    if base_dtype == "nf4":
        kept = params - quantized_params
        base = quantized_params * NF4_BYTES + 4 * kept
        host = (quantized_params * NF4_BYTES + 2 * kept) * devices_per_node * HOST_BUFFER_FACTOR
    else:
        base = DTYPE_BYTES[base_dtype] * params
        host = _loading_host_bytes(params, devices_per_node, DTYPE_BYTES[base_dtype])
    return ModelStates(
        weights=base + 4 * trainable,
        gradients=4 * trainable,
        optimizer=8 * trainable,
        gathered=0,
        host=host,
        ideal=base + 16 * trainable,
    )


def _loading_host_bytes(params: float, devices_per_node: int, weight_bytes: int = 4) -> float:
    """Each process on the node holds the weights it loads (fp32 but for a frozen base; DeepSpeed's no-offload
    host count)."""
    return weight_bytes * params * devices_per_node * HOST_BUFFER_FACTOR


# -- activations ---------------------------------------------------------------------------------


def _attention(shape: ModelShape, queries: int, keys: int, e: int) -> float:
    """Bytes kept for backward by one attention block, per sample (Korthikanti: 11sh + 5as²)."""
    h, inner = shape.hidden_size, shape.attention_dim
    kept = e * queries * h  # input to the q (and, for self-attention, k/v) projections
    kept += e * (queries + 2 * keys) * inner  # q, k, v
    kept += e * queries * inner  # input to the output projection
    kept += queries * h if shape.dropout else 0  # output dropout mask (1 byte)
    if shape.stores_attention_scores:
        per_score = e + (1 + e if shape.dropout else 0)  # softmax output, dropout mask and output
        kept += shape.heads * queries * keys * per_score
    return kept


def _feed_forward(shape: ModelShape, tokens: int, e: int) -> float:
    """Bytes kept by one feed-forward block, per sample (Korthikanti: 19sh for a 4h ReLU/GELU FFN).

    Per token, ffn-wide tensors: what the activation keeps, both inputs of the gate's product when
    gated (activation output, linear output), and the output projection's input.
    """
    h, f = shape.hidden_size, shape.ffn_dim
    kept = e * tokens * h  # input
    kept += e * tokens * f * (shape.activation_tensors + (2 if shape.gated_ffn else 0) + 1)
    kept += tokens * f if shape.ffn_dropout else 0  # dropout mask (1 byte)
    kept += tokens * h if shape.dropout else 0
    return kept


def _layer_norm(shape: ModelShape, tokens: int, e: int) -> float:
    per_element = 4 + 2 * e if shape.norm_keeps_fp32 else e
    return per_element * tokens * shape.hidden_size


def input_layer_bytes(shape: ModelShape, length: int, e: int) -> float:
    """One encoder (or decoder-only) layer: norm, self-attention, norm, feed-forward."""
    return 2 * _layer_norm(shape, length, e) + _attention(shape, length, length, e) + _feed_forward(shape, length, e)


def target_layer_bytes(shape: ModelShape, target: int, source: int, e: int) -> float:
    """One encoder-decoder decoder layer: self-attention, cross-attention over the source, FFN."""
    return (
        3 * _layer_norm(shape, target, e)
        + _attention(shape, target, target, e)
        + _attention(shape, target, source, e)
        + _feed_forward(shape, target, e)
    )


def logits_bytes(shape: ModelShape, input_length: int, target_length: int, e: int) -> float:
    """Vocabulary logits (in the activation dtype), plus the fp32 copy and log-softmax when the loss upcasts."""
    tokens = {"input": input_length, "target": target_length}.get(shape.logits_on or "", 0)
    return tokens * shape.vocab_size * (e + 8 if shape.loss_upcasts_logits else e)


def reference_model_bytes(params: float, weight_bytes: int, shards: int) -> float:
    """A frozen copy of the starting weights (DPO's and KTO's reference, GRPO's with a KL term): weights only,
    no gradients or optimizer states; ZeRO-3 partitions it like the policy (`shards` devices), else it is whole."""
    return weight_bytes * params / shards


def kv_cache_bytes(shape: ModelShape, tokens: int, e: int) -> float:
    """Generation's key/value cache for one sequence of `tokens` (prompt + completion), every layer.

    Keys and values at the full attention width: an upper bound for grouped-query models, whose config
    the shape does not keep the key/value heads of.
    """
    return 2 * shape.layers * shape.attention_dim * tokens * e


def activation_bytes(
    shape: ModelShape, *, input_length: int, target_length: int, activation_bytes: int, checkpointing: bool
) -> float:
    """Activation bytes kept for backward, per sample.

    Without checkpointing every layer's tensors are kept; with it (transformers checkpoints each
    layer) only each layer's input is kept and one layer's tensors exist again while it is
    recomputed. Either way the gradients flowing back through a layer take about one layer's
    tensors more, and the logits and the loss's fp32 copies are kept.
    """
    e = activation_bytes
    target_length = target_length if shape.decoder_layers else 0
    input_layer = input_layer_bytes(shape, input_length, e)
    target_layer = target_layer_bytes(shape, target_length, input_length, e) if target_length else 0.0
    largest_layer = max(input_layer, target_layer)
    if checkpointing:
        layer_inputs = e * shape.hidden_size * (shape.layers * input_length + shape.decoder_layers * target_length)
        kept = layer_inputs + largest_layer
    else:
        kept = shape.layers * input_layer + shape.decoder_layers * target_layer
    return kept + largest_layer + logits_bytes(shape, input_length, target_length, e)
