"""Adapters (LoRA, QLoRA): which modules they wrap, per architecture family, and what they train.

Light on purpose (no torch, no peft): the spec, the planner and the training program read the
same table, so the default the form shows is the one the run uses and the planner counts.
"""

from __future__ import annotations

import importlib.util

#: model_type -> the attention projections LoRA wraps by default (the LoRA paper's W_q and W_v)
TARGET_MODULES: dict[str, tuple[str, ...]] = {
    **dict.fromkeys(("bert", "roberta", "xlm-roberta", "camembert", "electra"), ("query", "value")),
    "distilbert": ("q_lin", "v_lin"),
    **dict.fromkeys(("t5", "mt5", "umt5"), ("q", "v")),
    "gpt2": ("c_attn",),
    **dict.fromkeys(("gpt_neox", "falcon", "bloom"), ("query_key_value",)),
    **dict.fromkeys(
        (
            "llama",
            "mistral",
            "mixtral",
            "qwen2",
            "qwen3",
            "gemma",
            "gemma2",
            "gemma3_text",
            "phi",
            "opt",
            "bart",
            "mbart",
            "pegasus",
        ),
        ("q_proj", "v_proj"),
    ),
}


def default_target_modules(model_type: str) -> tuple[str, ...] | None:
    """The family's default, or None for a family the table does not know (the spec must then name them)."""
    return TARGET_MODULES.get(model_type)


def missing_package(spec) -> str | None:
    """One sentence if the spec has an adapter and PEFT is not installed here (checked at launch and in the job)."""
    if spec.adapter is None or importlib.util.find_spec("peft") is not None:
        return None
    return "adapter needs PEFT, which is not installed here; pip install 'nbtoolkit-finetune[adapters]'"
