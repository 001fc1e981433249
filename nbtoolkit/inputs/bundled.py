"""The bundled tiny models and sample data: nbtoolkit/assets/'s and those a task brings in its own folder (its
`assets` and `tiny_model`): names, sizes, files.

Light on purpose (no transformers, no datasets): the planner and the form size and count
these without loading any model library.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from nbtoolkit.tasks import TASKS, TinyModel

ASSETS = Path(__file__).resolve().parent.parent / "assets"
TOKENIZERS = ASSETS / "tokenizers"


#: the tiny models of nbtoolkit/assets, shared by tasks; the task registry (nbtoolkit.tasks) names one per task
SHARED_TINY_MODELS: dict[str, TinyModel] = {
    "nbtoolkit/tiny-bert": TinyModel(
        "wordpiece",
        "bert",
        dict(
            hidden_size=64,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=128,
            max_position_embeddings=512,
        ),
    ),
    "nbtoolkit/tiny-t5": TinyModel(
        "sentencepiece-style",
        "t5",
        dict(d_model=64, d_kv=16, d_ff=128, num_layers=2, num_decoder_layers=2, num_heads=4),
    ),
    "nbtoolkit/tiny-gpt2": TinyModel("byte-bpe", "gpt2", dict(n_embd=64, n_layer=2, n_head=2, n_positions=512)),
    # Llama-shaped (gated FFN, grouped-query attention) with a ChatML template: the chat, preference and grpo model
    "nbtoolkit/tiny-chat": TinyModel(
        "chatml-bpe",
        "llama",
        dict(
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=512,
        ),
    ),
}


#: every bundled tiny model: the shared ones and each task's own (a name already taken keeps the shared model)
TINY_MODELS: dict[str, TinyModel] = {
    **{task.bundled_model: task.tiny_model for task in TASKS.values() if task.tiny_model},
    **SHARED_TINY_MODELS,
}


def is_bundled(name: str) -> bool:
    return name in TINY_MODELS


def tokenizer_dir(name: str) -> Path:
    tokenizer = TINY_MODELS[name].tokenizer
    return tokenizer if isinstance(tokenizer, Path) else TOKENIZERS / tokenizer


@cache
def vocab_size(name: str) -> int:
    """The bundled tokenizer's size (what `len(tokenizer)` gives), read from its tokenizer.json."""
    data = json.loads((tokenizer_dir(name) / "tokenizer.json").read_text())
    ids = set(data["model"]["vocab"].values()) | {token["id"] for token in data.get("added_tokens", [])}
    return max(ids) + 1


def tiny_config_fields(name: str) -> dict[str, Any]:
    """config.json fields of a bundled tiny model (what the planner needs to size it)."""
    model = TINY_MODELS[name]
    return with_language_facts(model.sizes, model_type=model.model_type, vocab_size=vocab_size(name))


def with_language_facts(sizes: dict[str, Any], **facts: Any) -> dict[str, Any]:
    """Config fields with the tokenizer's facts (vocabulary size, special token ids) where the language model reads
    them: its own text_config in a composite (vision-language) model, the top level otherwise."""
    if "text_config" not in sizes:
        return {**facts, **sizes}
    model_type = facts.pop("model_type", None)
    top = {"model_type": model_type} if model_type else {}
    return {**top, **sizes, "text_config": {**sizes["text_config"], **facts}}


def bundled_files(task: str) -> dict[str, str]:
    """The small sample dataset shipped for a task (in its own folder, or nbtoolkit/assets'): split name -> jsonl
    path."""
    return {path.stem: str(path) for path in sorted(TASKS[task].sample_folder.glob("*.jsonl"))}
