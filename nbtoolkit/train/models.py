"""Tokenizers and models: a hub id or local path, or a bundled tiny model built from a config."""

from __future__ import annotations

from pathlib import Path

import transformers
from packaging.version import Version
from transformers import AutoConfig, AutoTokenizer, PreTrainedTokenizerBase

from nbtoolkit.hardware.precision import spec_load_dtype
from nbtoolkit.inputs.bundled import TINY_MODELS, is_bundled, tokenizer_dir, with_language_facts
from nbtoolkit.inputs.packaged import packaged_model_path
from nbtoolkit.train.errors import TrainError
from nbtoolkit.trained_model.saved_folders import base_weights, config_folder, is_adapter_folder


def load_tokenizer(name: str) -> PreTrainedTokenizerBase:
    if is_bundled(name):
        return AutoTokenizer.from_pretrained(tokenizer_dir(name))
    return AutoTokenizer.from_pretrained(model_source(name))


def tiny_config(name: str, tokenizer: PreTrainedTokenizerBase, **overrides):
    """The config of a bundled tiny model, sized to its bundled tokenizer and using its special tokens."""
    model = TINY_MODELS[name]
    model_type = model.model_type
    special = {
        f"{role}_token_id": getattr(tokenizer, f"{role}_token_id")
        for role in ("bos", "eos")
        if getattr(tokenizer, f"{role}_token_id") is not None
    }
    if model_type == "t5":  # T5 starts decoding from the pad token
        special["decoder_start_token_id"] = tokenizer.pad_token_id
    fields = with_language_facts(model.sizes, vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id, **special)
    token_ids = {field: tokenizer.convert_tokens_to_ids(token) for field, token in model.tokens.items()}
    return AutoConfig.for_model(model_type, **fields, **token_ids, **overrides)


def model_config(name: str):
    """The model's config without its weights: a bundled tiny one, or config.json from a path or the hub."""
    if is_bundled(name):
        return tiny_config(name, load_tokenizer(name))
    try:
        return AutoConfig.from_pretrained(config_folder(model_source(name)))
    except OSError as exc:  # not a local folder, and the hub is unreachable or has no such model
        raise TrainError(
            f"model '{name}' could not be loaded ({str(exc).splitlines()[0]}); "
            "give a hub id reachable from here or a local model directory"
        ) from None


def ensure_pad_token(tokenizer: PreTrainedTokenizerBase) -> None:
    """GPT-2-style tokenizers have no pad token: batches pad with end-of-text (masked out of the loss)."""
    if tokenizer.pad_token is None and tokenizer.eos_token is not None:
        tokenizer.pad_token = tokenizer.eos_token


#: the keyword from_pretrained and from_config take the load dtype by: `dtype` from transformers 4.56 (4.56.2's
#: modeling_utils.py:2408 and 4754 pop it), `torch_dtype` before: Neuron SDK 2.26's 4.55.4 pops only `torch_dtype`
#: (its modeling_utils.py:2358 and 4622) and hands `dtype` on to the model's __init__, a TypeError at start-up
#: (found by `nbtoolkit rehearse --image-env`); transformers 5 still takes `torch_dtype`, with a warning
DTYPE_KEYWORD = "dtype" if Version(transformers.__version__).release >= (4, 56) else "torch_dtype"


def as_loaded(dtype) -> dict:
    """The load dtype as this transformers' from_pretrained/from_config keyword."""
    return {DTYPE_KEYWORD: dtype}


def load_model(auto_class, spec, tokenizer: PreTrainedTokenizerBase, **config_overrides):
    """`auto_class` (e.g. AutoModelForSequenceClassification) for the spec's model: from the hub or a path in
    the dtype nbtoolkit.hardware.precision names (transformers 5 would keep the checkpoint's own), or built tiny.

    QLoRA loads 4-bit weights (pretrained models only; the adapter check says so first);
    `train.from_config` builds the model's architecture with random weights (training from scratch).
    """
    name = spec.model_name
    dtype = spec_load_dtype(spec)
    if is_bundled(name):
        return auto_class.from_config(tiny_config(name, tokenizer, **config_overrides), **as_loaded(torch_dtype(dtype)))
    if is_adapter_folder(model_source(name)) and not spec.train.from_config:
        return merged_adapter(auto_class, model_source(name), dtype, **config_overrides)
    if spec.train.from_config:
        config = model_config(name)
        for key, value in config_overrides.items():
            setattr(config, key, value)
        return auto_class.from_config(config, **as_loaded(torch_dtype(dtype)))
    if dtype == "nf4":
        return auto_class.from_pretrained(model_source(name), **config_overrides, **quantized_loading(spec.precision))
    return auto_class.from_pretrained(model_source(name), **as_loaded(torch_dtype(dtype)), **config_overrides)


def merged_adapter(auto_class, folder: str, dtype: str, **config_overrides):
    """An earlier run's adapter merged into its base: the full model a chained run (`model: job:ID`) starts from."""
    from peft import PeftModel

    config = AutoConfig.from_pretrained(config_folder(folder), **config_overrides)
    base = auto_class.from_pretrained(base_weights(folder), config=config, **as_loaded(torch_dtype(dtype)))
    merged = PeftModel.from_pretrained(base, folder).merge_and_unload()
    return merged.requires_grad_(True)  # PEFT loads an adapter frozen, for inference; this run trains it all


def base_made_here(spec) -> bool:
    """Whether the run's base model exists only in this run (an adapter run then saves its weights beside the
    adapter): a bundled tiny model built from its config, or an earlier adapter merged at load."""
    return is_bundled(spec.model_name) or is_adapter_folder(model_source(spec.model_name))


def torch_dtype(name: str):
    """The torch dtype of a nbtoolkit.hardware.precision name (NF4's unquantized layers are bf16)."""
    import torch

    return torch.bfloat16 if name == "nf4" else getattr(torch, name)


def model_source(name: str) -> str:
    """A local directory if one exists at `name` (with ~ expanded), else an installed packaged copy, else the hub id."""
    path = Path(name).expanduser()
    if path.exists():
        return str(path)
    packaged = packaged_model_path(name)
    return str(packaged) if packaged else name


def quantized_loading(precision: str) -> dict:
    """from_pretrained options of QLoRA: 4-bit NF4 weights, double quantization, computing (and loading the layers
    left unquantized) in the spec's precision: bf16 as the QLoRA paper, fp16 where the GPU has no bf16 (a T4)."""
    dtype = torch_dtype({"fp32": "float32", "fp16": "float16"}.get(precision, "bfloat16"))
    from transformers import BitsAndBytesConfig

    return {
        "quantization_config": BitsAndBytesConfig(
            load_in_4bit=True,
            bnb_4bit_quant_type="nf4",
            bnb_4bit_use_double_quant=True,
            bnb_4bit_compute_dtype=dtype,
        ),
        "dtype": dtype,
    }
