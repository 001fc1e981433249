"""The bundled tiny models and sample data under nbtoolkit/assets/: names, sizes, files.

Light on purpose (no transformers, no datasets): the planner and the form size and count
these without loading any model library.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any, NamedTuple

from nbtoolkit.tasks import TASKS

ASSETS = Path(__file__).resolve().parent.parent / "assets"
TOKENIZERS = ASSETS / "tokenizers"


class TinyModel(NamedTuple):
    tokenizer: str  # folder under assets/tokenizers (a processor's folder for a vision-language model)
    model_type: str  # transformers config type
    sizes: dict[str, Any]  # config fields; a composite model's language model in text_config
    #: config field -> the token whose id it holds (a vision-language model's image tokens), read from the tokenizer
    tokens: dict[str, str] = {}  # noqa: RUF012 (a NamedTuple default: never mutated)


#: bundled tiny models (train in seconds on CPU); the task registry (nbtoolkit.tasks) names one per task
TINY_MODELS: dict[str, TinyModel] = {
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
    # Gemma 3's layout (SigLIP vision tower, average-pooled to mm_tokens_per_image soft tokens per image, Gemma 3
    # language model) with the ChatML tokenizer and its image tokens: the vision-chat model. Gemma 3 rather than
    # Qwen2.5-VL: transformers 5.23's Qwen2-VL processors need torchvision (their video processor), which nbtoolkit's
    # lock has not; Gemma 3's processor runs on Pillow alone
    "nbtoolkit/tiny-vlm": TinyModel(
        "chatml-vision",
        "gemma3",
        dict(
            text_config=dict(
                hidden_size=64,
                intermediate_size=128,
                num_hidden_layers=2,
                num_attention_heads=4,
                num_key_value_heads=2,
                head_dim=16,
                max_position_embeddings=512,
                sliding_window=64,
            ),
            # 28 px images in 7 px patches: 16 patches, pooled 2x2 to the processor's 4 image tokens
            vision_config=dict(
                hidden_size=32,
                intermediate_size=64,
                num_hidden_layers=2,
                num_attention_heads=2,
                image_size=28,
                patch_size=7,
                vision_use_head=False,  # as Gemma 3's: its patches, not one pooled vector, reach the projector
            ),
            mm_tokens_per_image=4,
        ),
        tokens=dict(
            boi_token_index="<start_of_image>", eoi_token_index="<end_of_image>", image_token_index="<image_soft_token>"
        ),
    ),
}


def is_bundled(name: str) -> bool:
    return name in TINY_MODELS


def tokenizer_dir(name: str) -> Path:
    return TOKENIZERS / TINY_MODELS[name].tokenizer


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
    """The small sample dataset shipped for a task: split name -> jsonl path."""
    folder = ASSETS / "data" / (TASKS[task].sample_data or task)
    return {path.stem: str(path) for path in sorted(folder.glob("*.jsonl"))}
