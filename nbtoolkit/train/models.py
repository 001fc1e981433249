"""Tokenizers and models: a hub id or local path, or a bundled tiny model built from a config."""

from __future__ import annotations

from pathlib import Path

from transformers import AutoConfig, AutoTokenizer, PreTrainedTokenizerBase

from nbtoolkit.train.data import ASSETS

TOKENIZERS = ASSETS / "tokenizers"

#: bundled tiny models: tokenizer folder + config class and sizes (trains in seconds on CPU)
TINY_MODELS: dict[str, tuple[str, str, dict]] = {
    "nbtoolkit/tiny-bert": ("wordpiece", "bert", dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                                                         intermediate_size=128, max_position_embeddings=512)),
}


def is_bundled(name: str) -> bool:
    return name in TINY_MODELS


def load_tokenizer(name: str) -> PreTrainedTokenizerBase:
    if is_bundled(name):
        return AutoTokenizer.from_pretrained(TOKENIZERS / TINY_MODELS[name][0])
    return AutoTokenizer.from_pretrained(_source(name))


def tiny_config(name: str, tokenizer: PreTrainedTokenizerBase, **overrides):
    """The config of a bundled tiny model, sized to its bundled tokenizer."""
    _, model_type, sizes = TINY_MODELS[name]
    return AutoConfig.for_model(model_type, vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id,
                                **sizes, **overrides)


def load_model(auto_class, name: str, tokenizer: PreTrainedTokenizerBase, **config_overrides):
    """`auto_class` (e.g. AutoModelForSequenceClassification) from the hub/a path, or built tiny."""
    if is_bundled(name):
        return auto_class.from_config(tiny_config(name, tokenizer, **config_overrides))
    return auto_class.from_pretrained(_source(name), **config_overrides)


def _source(name: str) -> str:
    """A local directory if one exists at `name` (with ~ expanded), else the hub id."""
    path = Path(name).expanduser()
    return str(path) if path.exists() else name
