"""Tokenizers and models: a hub id or local path, or a bundled tiny model built from a config."""

from __future__ import annotations

from pathlib import Path

from transformers import AutoConfig, AutoTokenizer, PreTrainedTokenizerBase

from nbtoolkit.packaged import packaged_model_path
from nbtoolkit.train.data import ASSETS
from nbtoolkit.train.errors import TrainError

TOKENIZERS = ASSETS / "tokenizers"

#: bundled tiny models: tokenizer folder + config class and sizes (trains in seconds on CPU)
TINY_MODELS: dict[str, tuple[str, str, dict]] = {
    "nbtoolkit/tiny-bert": ("wordpiece", "bert", dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                                                         intermediate_size=128, max_position_embeddings=512)),
    "nbtoolkit/tiny-t5": ("sentencepiece-style", "t5", dict(d_model=64, d_kv=16, d_ff=128, num_layers=2,
                                                             num_decoder_layers=2, num_heads=4)),
    "nbtoolkit/tiny-gpt2": ("byte-bpe", "gpt2", dict(n_embd=64, n_layer=2, n_head=2, n_positions=512)),
}


def is_bundled(name: str) -> bool:
    return name in TINY_MODELS


def load_tokenizer(name: str) -> PreTrainedTokenizerBase:
    if is_bundled(name):
        return AutoTokenizer.from_pretrained(TOKENIZERS / TINY_MODELS[name][0])
    return AutoTokenizer.from_pretrained(_source(name))


def tiny_config(name: str, tokenizer: PreTrainedTokenizerBase, **overrides):
    """The config of a bundled tiny model, sized to its bundled tokenizer and using its special tokens."""
    _, model_type, sizes = TINY_MODELS[name]
    special = {f"{role}_token_id": getattr(tokenizer, f"{role}_token_id") for role in ("bos", "eos")
               if getattr(tokenizer, f"{role}_token_id") is not None}
    if model_type == "t5":  # T5 starts decoding from the pad token
        special["decoder_start_token_id"] = tokenizer.pad_token_id
    return AutoConfig.for_model(model_type, vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id,
                                **special, **sizes, **overrides)


def model_config(name: str):
    """The model's config without its weights: a bundled tiny one, or config.json from a path or the hub."""
    if is_bundled(name):
        return tiny_config(name, load_tokenizer(name))
    try:
        return AutoConfig.from_pretrained(_source(name))
    except OSError as exc:  # not a local folder, and the hub is unreachable or has no such model
        raise TrainError(f"model '{name}' could not be loaded ({str(exc).splitlines()[0]}); "
                         "give a hub id reachable from here or a local model directory") from None


def ensure_pad_token(tokenizer: PreTrainedTokenizerBase) -> None:
    """GPT-2-style tokenizers have no pad token: batches pad with end-of-text (masked out of the loss)."""
    if tokenizer.pad_token is None and tokenizer.eos_token is not None:
        tokenizer.pad_token = tokenizer.eos_token


def load_model(auto_class, name: str, tokenizer: PreTrainedTokenizerBase, **config_overrides):
    """`auto_class` (e.g. AutoModelForSequenceClassification) from the hub/a path, or built tiny."""
    if is_bundled(name):
        return auto_class.from_config(tiny_config(name, tokenizer, **config_overrides))
    return auto_class.from_pretrained(_source(name), **config_overrides)


def _source(name: str) -> str:
    """A local directory if one exists at `name` (with ~ expanded), else an installed packaged copy, else the hub id."""
    path = Path(name).expanduser()
    if path.exists():
        return str(path)
    packaged = packaged_model_path(name)
    return str(packaged) if packaged else name
