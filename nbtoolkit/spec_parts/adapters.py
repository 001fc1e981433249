"""Adapters (LoRA, QLoRA): which modules they wrap, and whether PEFT is here to train them.

Light on purpose (no torch, no peft): the spec, the planner and the training program read the
same default, so what the form shows is what the run wraps and the planner counts.
"""

from __future__ import annotations

import importlib.util

#: PEFT's spelling of "every linear layer but the output head" (peft.utils.constants.INCLUDE_LINEAR_LAYERS_SHORTHAND):
#: the default, as Axolotl, LLaMA-Factory, Unsloth and the QLoRA paper wrap; it needs no per-family table
ALL_LINEAR = "all-linear"


def target_modules(adapter) -> list[str] | str:
    """The module names an adapter block wraps: its own list, or every linear layer."""
    return list(adapter.target_modules) if adapter.target_modules else ALL_LINEAR


def missing_package(spec) -> str | None:
    """One sentence if the spec has an adapter and PEFT is not installed here (checked at launch and in the job)."""
    if spec.adapter is None or importlib.util.find_spec("peft") is not None:
        return None
    return "adapter needs PEFT, which is not installed here; pip install 'nbtoolkit-finetune[adapters]'"
