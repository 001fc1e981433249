"""Activation memory of T5 (HF transformers, eager attention), measured vs the planner's formula.

What autograd keeps for backward is measured exactly on CPU (nbtoolkit.planner.calibrate): every
tensor saved during the forward pass, counted once per storage, in bf16 as a bf16 GPU run keeps
them. Compared with `planner.memory.activation_bytes` (the tensors kept for backward, without the
transient layer the backward pass adds) over several shapes, batch sizes and lengths: the ratios
and residuals say how far to trust the formula for encoder-decoders. No GPU needed; the allocator's
peak on a GPU adds workspace and fragmentation that this does not see.

    python benchmarks/activation_memory.py
"""

from __future__ import annotations

import itertools

import numpy as np
import torch
from transformers import T5Config, T5ForConditionalGeneration

from nbtoolkit.planner import memory
from nbtoolkit.planner.calibrate import saved_activation_bytes
from nbtoolkit.planner.shapes import shape_from_config

#: FLAN-T5's architecture (gated GELU, dropout 0.1, 32128 words) at widths a CPU measures quickly
SHAPES = [
    dict(d_model=256, d_kv=64, d_ff=640, num_heads=4, num_layers=2),
    dict(d_model=512, d_kv=64, d_ff=1024, num_heads=8, num_layers=2),
    dict(d_model=384, d_kv=32, d_ff=1536, num_heads=12, num_layers=3),
]
BATCHES = (1, 4)
LENGTHS = ((64, 16), (128, 32), (256, 64))


def formula_parts(shape, batch: int, source: int, target: int) -> np.ndarray:
    """The formula's saved bytes split into layer tensors, attention scores and logits (per batch)."""

    def kept(shape) -> float:
        per_sample = memory.activation_bytes(
            shape, input_length=source, target_length=target, activation_bytes=2, checkpointing=False
        )
        largest = max(memory.input_layer_bytes(shape, source, 2), memory.target_layer_bytes(shape, target, source, 2))
        return per_sample - largest  # the transient backward layer is not a saved tensor

    logits = memory.logits_bytes(shape, source, target, 2)
    without_scores = kept(shape.model_copy(update={"stores_attention_scores": False}))
    return batch * np.array([without_scores - logits, kept(shape) - without_scores, logits])


def main() -> None:
    torch.manual_seed(0)
    print(
        f"{'d_model':>7} {'heads':>5} {'layers':>6} {'batch':>5} {'src':>4} {'tgt':>4} "
        f"{'measured MiB':>12} {'formula MiB':>11} {'ratio':>6}"
    )
    measured, parts = [], []
    for fields, batch, (source, target) in itertools.product(SHAPES, BATCHES, LENGTHS):
        config = T5Config(
            vocab_size=32128,
            feed_forward_proj="gated-gelu",
            dropout_rate=0.1,
            tie_word_embeddings=False,
            decoder_start_token_id=0,
            pad_token_id=0,
            attn_implementation="eager",
            **fields,
        )
        model = T5ForConditionalGeneration(config).to(torch.bfloat16).train()
        measured.append(
            saved_activation_bytes(
                model,
                input_ids=torch.randint(0, config.vocab_size, (batch, source)),
                labels=torch.randint(0, config.vocab_size, (batch, target)),
            )
        )
        parts.append(
            formula_parts(shape_from_config("t5-measured", config.to_dict(), "benchmark"), batch, source, target)
        )
        formula = parts[-1].sum()
        print(
            f"{fields['d_model']:>7} {fields['num_heads']:>5} {fields['num_layers']:>6} {batch:>5} {source:>4} "
            f"{target:>4} {measured[-1] / 2**20:>12.1f} {formula / 2**20:>11.1f} {measured[-1] / formula:>6.3f}"
        )
    measured, parts = np.array(measured, dtype=float), np.array(parts)
    ratios = np.sort(measured / parts.sum(axis=1))
    print(
        f"measured / formula: min {ratios[0]:.3f}, median {np.median(ratios):.3f}, max {ratios[-1]:.3f} "
        f"over {len(ratios)} shapes"
    )
    scale, *_ = np.linalg.lstsq(parts, measured, rcond=None)
    residuals = measured / (parts @ scale) - 1
    print(
        "least-squares scale per term (1.0 = the formula counts it exactly): "
        f"layer tensors {scale[0]:.3f}, attention scores {scale[1]:.3f}, logits {scale[2]:.3f}; "
        f"relative residuals after the fit: max {np.abs(residuals).max():.3f}"
    )


if __name__ == "__main__":
    main()
