"""Measure what the activation formula predicts: the bytes autograd keeps for backward.

Run on CPU, this counts exactly what a GPU run of the same model in the same dtype keeps between
forward and backward (dropout runs as CUDA's fused kernel, with a 1-byte mask); it does not see
the allocator's workspaces or fragmentation, which the planner's overhead term covers. Used by
benchmarks/activation_memory.py and the planner's tests. Imports torch when called.
"""

from __future__ import annotations

import unittest.mock
from typing import Any


def _cuda_dropout(input: Any, p: float = 0.5, training: bool = True, inplace: bool = False) -> Any:
    """Dropout as CUDA runs it: one fused kernel that keeps a 1-byte mask (CPU's keeps one in the input dtype)."""
    import torch

    return torch.native_dropout(input, p, training)[0] if training and p > 0 else input


def saved_activation_bytes(model: Any, **inputs: Any) -> int:
    """Bytes of the distinct storages autograd saves in one training forward pass (parameters excluded)."""
    import torch

    parameters = {param.untyped_storage().data_ptr() for param in model.parameters()}
    storages: dict[int, int] = {}

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in parameters:
            storages[storage.data_ptr()] = storage.nbytes()
        return tensor

    with (
        torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor),
        unittest.mock.patch("torch.nn.functional.dropout", _cuda_dropout),
    ):
        model(**inputs).loss.backward()
    return sum(storages.values())
