"""Model and dataset sizes without downloading weights or data.

A model's shape (parameter count, hidden size, layers, largest layer, the weights each token
passes through) comes from its config: the built-in table of common families
(`model_configs.yaml`), a local config.json, the bundled tiny models, or a config.json already in
the Hugging Face cache (read without importing transformers; planning never downloads).
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from nbtoolkit.hardware.catalog import read_yaml
from nbtoolkit.inputs.bundled import bundled_files, is_bundled, tiny_config_fields
from nbtoolkit.spec import RunSpec
from nbtoolkit.trained_model.saved_folders import config_folder

MODEL_CONFIGS = Path(__file__).with_name("model_configs.yaml")

#: model types sized with BERT's layout (embeddings + post-norm encoder layers + pooler)
BERT_LIKE = ("bert", "roberta", "xlm-roberta", "camembert")
T5_LIKE = ("t5", "mt5", "umt5")

#: train-split sizes of hub datasets the example notebooks use: (name, config) -> examples
KNOWN_DATASET_SIZES: dict[tuple[str, str | None], int] = {
    ("cnn_dailymail", "3.0.0"): 287_113,  # https://huggingface.co/datasets/abisee/cnn_dailymail
    ("abisee/cnn_dailymail", "3.0.0"): 287_113,
    ("samsum", None): 14_732,  # https://huggingface.co/datasets/Samsung/samsum
    ("philschmid/emotion", None): 16_000,  # https://huggingface.co/datasets/dair-ai/emotion
    ("dair-ai/emotion", None): 16_000,
    ("squad", None): 87_599,  # https://huggingface.co/datasets/rajpurkar/squad
    ("rajpurkar/squad", None): 87_599,
}


class ModelShapeError(ValueError):
    """No config could be found for a model; the message says where we looked."""


class ModelShape(BaseModel):
    """What memory and FLOP estimates need to know about a model, nothing more."""

    model_config = ConfigDict(frozen=True)

    name: str
    model_type: str
    architecture: Literal["encoder-decoder", "encoder", "decoder"]
    params: int
    exact: bool  # counted from the layout (True) or estimated from a few sizes (False)
    source: str  # where the config came from
    hidden_size: int
    layers: int  # layers over the input sequence (the encoder's, or all of a decoder-only model's)
    decoder_layers: int  # layers over the target sequence (encoder-decoder only)
    heads: int
    attention_dim: int  # heads x head size
    ffn_dim: int
    gated_ffn: bool
    vocab_size: int
    largest_layer_params: int  # the biggest single module (DeepSpeed's `largest_layer_params`)
    input_matmul_params: int  # weights each input token multiplies through (FLOPs/token = 2x this)
    target_matmul_params: int  # the same for each target token (encoder-decoder)
    dropout: bool
    stores_attention_scores: bool  # eager attention keeps heads x len x len scores for backward
    #: T5's RMSNorm upcasts: besides its input it keeps an fp32 copy and the normalised value
    norm_keeps_fp32: bool = False
    #: tensors the FFN activation keeps for backward: its input for torch's GELU/ReLU/SiLU; 4 for the tanh
    #: GELU ("gelu_new") that transformers writes out in eager ops
    activation_tensors: int = 1
    #: dropout between the FFN activation and the output projection (T5)
    ffn_dropout: bool = False
    #: the loss keeps an fp32 copy and the log-softmax of the logits (transformers' causal-LM loss); T5's
    #: cross-entropy runs on the logits as they are
    loss_upcasts_logits: bool = True
    #: a decoder's output head when it is not tied to the embeddings (vocab x hidden), among `params`: what a
    #: sequence-classification model of the same config (a reward model) has instead of it is one score per label
    untied_head_params: int = 0
    #: a vision-language model's vision tower and its projector into the language model, among `params`
    vision_params: int = 0
    #: the projector among vision_params: vision-chat freezes the tower alone (vision_chat.train.vision_tower), so
    #: the projector trains with the language model
    projector_params: int = 0
    #: the patches the vision tower reads per image, and the tokens an image becomes in the language model's
    #: sequence, both at the processor's resolution (the image is resized to the tower's image_size)
    image_patches: int = 0
    image_tokens: int = 0

    @property
    def quantized_params(self) -> int:
        """The weights bitsandbytes' 4-bit loading quantizes: every block's linear layers, i.e. the weights tokens
        multiply through but the output layer (transformers' get_keys_to_not_convert keeps it, the embeddings and
        the norms are no linear layers)."""
        output_layer = self.vocab_size * self.hidden_size if self.logits_on else 0
        return self.input_matmul_params + self.target_matmul_params - output_layer

    @property
    def logits_on(self) -> Literal["input", "target"] | None:
        """Which sequence the vocabulary logits cover (none for encoders: a small head)."""
        covered: dict[str, Literal["input", "target"]] = {"encoder-decoder": "target", "decoder": "input"}
        return covered.get(self.architecture)


# -- parameter counts from config fields ---------------------------------------------------------


def _t5(cfg: dict[str, Any]) -> dict[str, Any]:
    d, f, heads = cfg["d_model"], cfg["d_ff"], cfg["num_heads"]
    inner = heads * cfg["d_kv"]
    enc_layers = cfg["num_layers"]
    dec_layers = cfg.get("num_decoder_layers") or enc_layers
    gated = str(cfg.get("feed_forward_proj", "relu")).startswith("gated")
    tied = cfg.get("tie_word_embeddings", True)
    vocab = cfg["vocab_size"]
    attention = 4 * d * inner  # q, k, v, o
    ffn = (3 if gated else 2) * d * f  # wi (wi_0, wi_1 when gated), wo
    position_bias = cfg.get("relative_attention_num_buckets", 32) * heads  # first layer of each stack
    encoder = enc_layers * (attention + ffn + 2 * d) + position_bias + d
    decoder = dec_layers * (2 * attention + ffn + 3 * d) + position_bias + d
    cross_kv = 2 * d * inner  # cross-attention k, v run over the encoder's (input) tokens
    return dict(
        architecture="encoder-decoder",
        params=vocab * d * (1 if tied else 2) + encoder + decoder,
        exact=True,
        hidden_size=d,
        layers=enc_layers,
        decoder_layers=dec_layers,
        heads=heads,
        attention_dim=inner,
        ffn_dim=f,
        gated_ffn=gated,
        vocab_size=vocab,
        largest_layer_params=max(vocab * d, d * f, d * inner),
        input_matmul_params=enc_layers * (attention + ffn) + dec_layers * cross_kv,
        target_matmul_params=dec_layers * (2 * attention - cross_kv + ffn) + vocab * d,
        dropout=cfg.get("dropout_rate", 0.1) > 0,
        stores_attention_scores=True,  # eager attention, as the tutorials' transformers 4 ran T5
        # what HF's T5 keeps besides, measured by benchmarks/activation_memory.py
        norm_keeps_fp32=True,
        activation_tensors=4 if _activation(cfg) == "gelu_new" else 1,
        ffn_dropout=cfg.get("dropout_rate", 0.1) > 0,
        loss_upcasts_logits=False,
    )


def _activation(cfg: dict[str, Any]) -> str:
    """T5's FFN activation: `feed_forward_proj` is "relu", "gated-gelu" (transformers maps that to the
    tanh GELU, gelu_new) or "[gated-]<name>"."""
    name = str(cfg.get("feed_forward_proj", "relu")).removeprefix("gated-")
    return "gelu_new" if name == "gelu" else name


def _bert(cfg: dict[str, Any]) -> dict[str, Any]:
    h, layers, inner = cfg["hidden_size"], cfg["num_hidden_layers"], cfg["intermediate_size"]
    vocab = cfg["vocab_size"]
    embeddings = (vocab + cfg.get("max_position_embeddings", 512) + cfg.get("type_vocab_size", 2)) * h + 2 * h
    layer = 4 * (h * h + h) + (h * inner + inner) + (inner * h + h) + 4 * h  # attention, ffn, 2 layer norms
    pooler = h * h + h
    return dict(
        architecture="encoder",
        params=embeddings + layers * layer + pooler,
        exact=True,
        hidden_size=h,
        layers=layers,
        decoder_layers=0,
        heads=cfg["num_attention_heads"],
        attention_dim=h,
        ffn_dim=inner,
        gated_ffn=False,
        vocab_size=vocab,
        largest_layer_params=max(vocab * h, cfg.get("max_position_embeddings", 512) * h, h * inner + inner),
        input_matmul_params=layers * (4 * h * h + 2 * h * inner),
        target_matmul_params=0,
        dropout=cfg.get("hidden_dropout_prob", 0.1) > 0,
        stores_attention_scores=False,  # PyTorch SDPA (transformers' default) keeps no score matrix
    )


def _gpt2(cfg: dict[str, Any]) -> dict[str, Any]:
    h, layers, vocab = cfg["n_embd"], cfg["n_layer"], cfg["vocab_size"]
    inner = cfg.get("n_inner") or 4 * h
    layer = (h * 3 * h + 3 * h) + (h * h + h) + (h * inner + inner) + (inner * h + h) + 4 * h
    return dict(
        architecture="decoder",
        params=(vocab + cfg.get("n_positions", 1024)) * h + layers * layer + 2 * h,
        exact=True,
        hidden_size=h,
        layers=layers,
        decoder_layers=0,
        heads=cfg["n_head"],
        attention_dim=h,
        ffn_dim=inner,
        gated_ffn=False,
        vocab_size=vocab,
        largest_layer_params=max(vocab * h, cfg.get("n_positions", 1024) * h, h * inner + inner, 3 * h * h + 3 * h),
        input_matmul_params=layers * (4 * h * h + 2 * h * inner) + vocab * h,
        target_matmul_params=0,
        dropout=cfg.get("resid_pdrop", 0.1) > 0,
        stores_attention_scores=False,
    )


def _generic_decoder(cfg: dict[str, Any]) -> dict[str, Any]:
    """Llama-style decoders and anything else with the usual size fields: an estimate."""
    try:
        h, layers, vocab = cfg["hidden_size"], cfg["num_hidden_layers"], cfg["vocab_size"]
        heads = cfg["num_attention_heads"]
        inner = cfg.get("intermediate_size") or 4 * h
    except KeyError as missing:
        raise ModelShapeError(f"its config has no {missing} field, so it cannot be sized") from None
    head_dim = cfg.get("head_dim") or h // heads
    kv_dim = (cfg.get("num_key_value_heads") or heads) * head_dim
    gated = cfg.get("hidden_act") in ("silu", "swiglu") or cfg.get("hidden_activation") is not None
    attention = 2 * h * heads * head_dim + 2 * h * kv_dim
    ffn = (3 if gated else 2) * h * inner
    tied = cfg.get("tie_word_embeddings", False)
    return dict(
        architecture="decoder",
        params=layers * (attention + ffn + 2 * h) + vocab * h * (1 if tied else 2) + h,
        untied_head_params=0 if tied else vocab * h,
        exact=False,
        hidden_size=h,
        layers=layers,
        decoder_layers=0,
        heads=heads,
        attention_dim=heads * head_dim,
        ffn_dim=inner,
        gated_ffn=gated,
        vocab_size=vocab,
        largest_layer_params=max(vocab * h, h * inner),
        input_matmul_params=layers * (attention + ffn) + vocab * h,
        target_matmul_params=0,
        dropout=float(cfg.get("attention_dropout", 0.0) or 0.0) > 0,
        stores_attention_scores=False,
    )


#: vision towers the planner counts (a ViT: patch embedding, positions, pre-norm layers): their config types
VISION_TOWERS = ("siglip_vision_model", "clip_vision_model")


def _vision(cfg: dict[str, Any]) -> dict[str, int]:
    """A vision-language model's vision tower and projector: parameters (exact, as transformers 5.23 builds them:
    models/siglip/modeling_siglip.py, models/clip/modeling_clip.py), patches and image tokens per image.

    Gemma 3 average-pools the tower's patches to mm_tokens_per_image tokens and projects them with one matrix and an
    RMSNorm (models/gemma3/modeling_gemma3.py, Gemma3MultiModalProjector); LLaVA keeps every patch (not CLIP's class
    token) and projects with a two-layer MLP (models/llava/modeling_llava.py, LlavaMultiModalProjector)."""
    vision, text = cfg["vision_config"], cfg["text_config"]
    tower = vision.get("model_type", "siglip_vision_model" if cfg.get("model_type") == "gemma3" else "")
    if tower not in VISION_TOWERS or cfg.get("model_type") not in ("gemma3", "llava"):
        raise ModelShapeError(
            f"its vision tower ({tower or 'unknown'}) in a {cfg.get('model_type')} model is not one the planner "
            "sizes; it sizes gemma3 and llava models with siglip or clip towers"
        )
    d, inner, layers = vision["hidden_size"], vision["intermediate_size"], vision["num_hidden_layers"]
    patch, size = vision.get("patch_size", 14), vision.get("image_size", 224)
    patches = (size // patch) ** 2
    layer = 4 * (d * d + d) + (d * inner + inner) + (inner * d + d) + 4 * d  # attention, MLP, two layer norms
    params = layers * layer + 2 * d  # the last layer norm
    if tower == "siglip_vision_model":
        params += 3 * patch * patch * d + d + patches * d  # patch convolution (with bias), positions
        if vision.get("vision_use_head", True):  # attention pooling: probe, attention, norm, MLP
            params += d + 3 * d * d + 3 * d + d * d + d + 2 * d + (d * inner + inner) + (inner * d + d)
    else:  # CLIP: a class token, a bias-free patch convolution, positions for the patches and the class token
        params += d + 3 * patch * patch * d + (patches + 1) * d + 2 * d  # and a layer norm before the layers
    hidden = text["hidden_size"]
    if cfg["model_type"] == "gemma3":
        projector = d * hidden + d
        tokens = cfg.get("mm_tokens_per_image", 256)
    else:
        bias = cfg.get("multimodal_projector_bias", True)
        projector = d * hidden + hidden * hidden + 2 * hidden * bias
        tokens = patches
    return {
        "vision_params": params + projector,
        "projector_params": projector,
        "image_patches": patches,
        "image_tokens": tokens,
    }


def shape_from_config(name: str, cfg: dict[str, Any], source: str) -> ModelShape:
    """A ModelShape from config.json fields (also what `AutoConfig(...).to_dict()` gives); a vision-language model's
    from its language model's text_config, with its vision tower and projector added."""
    if "vision_config" in cfg and "text_config" in cfg:
        try:
            vision = _vision(cfg)
        except KeyError as missing:
            raise ModelShapeError(
                f"model {name}: its vision_config has no {missing} field, so it cannot be sized"
            ) from None
        except ModelShapeError as exc:
            raise ModelShapeError(f"model {name}: {exc}") from None
        # the output layer's tie is the composite's (Gemma 3's default: tied; LLaVA's: its text model's)
        tied = {"tie_word_embeddings": cfg["tie_word_embeddings"]} if "tie_word_embeddings" in cfg else {}
        if not tied and cfg["model_type"] == "gemma3":
            tied = {"tie_word_embeddings": True}
        language = shape_from_config(name, {**cfg["text_config"], **tied}, source)
        return language.model_copy(
            update={"model_type": cfg["model_type"], "params": language.params + vision["vision_params"], **vision}
        )
    model_type = str(cfg.get("model_type", ""))
    families = {**dict.fromkeys(T5_LIKE, _t5), **dict.fromkeys(BERT_LIKE, _bert), "gpt2": _gpt2}
    if model_type in families:
        try:
            fields = families[model_type](cfg)
        except KeyError as missing:  # a config.json cut short, or written by hand
            raise ModelShapeError(
                f"model {name} ({model_type}): its config has no {missing} field, so it cannot be sized"
            ) from None
    elif cfg.get("is_encoder_decoder"):
        raise ModelShapeError(
            f"model {name} is an encoder-decoder of type '{model_type}', which the planner "
            f"cannot size; it sizes {', '.join(T5_LIKE)} encoder-decoders"
        )
    else:
        try:
            fields = _generic_decoder(cfg)
        except ModelShapeError as exc:
            raise ModelShapeError(f"model {name} ({model_type or 'unknown type'}): {exc}") from None
    return ModelShape(name=name, model_type=model_type, source=source, **fields)


# -- where configs come from ---------------------------------------------------------------------


@cache
def _builtin() -> dict[str, dict[str, Any]]:
    table = {}
    for name, entry in read_yaml(MODEL_CONFIGS).items():
        entry = dict(entry)
        for alias in [name, *entry.pop("aliases", [])]:
            table[alias.lower()] = {"canonical": name, **entry}
    return table


def builtin_models() -> list[str]:
    return sorted({entry["canonical"] for entry in _builtin().values()})


def model_shape(name: str) -> ModelShape:
    """Shape of a hub id, local path or bundled tiny model; raises ModelShapeError if unknown."""
    config, source = model_config_fields(name)
    return shape_from_config(name, config, source)


def model_config_fields(name: str) -> tuple[dict[str, Any], str]:
    """config.json fields of a hub id, local path or bundled tiny model, and where they came from;
    never from the network. Raises ModelShapeError if none is found."""
    entry = _builtin().get(name.lower())
    if entry is not None:
        return entry, f"built-in table ({entry['canonical']})"
    path = Path(name).expanduser()
    if path.exists():
        config_file = config_folder(path) / "config.json" if path.is_dir() else path
        if not config_file.is_file():
            raise ModelShapeError(
                f"model path {name} has no config.json; give a model directory saved by save_pretrained"
            )
        return json.loads(config_file.read_text()), str(config_file)
    if name.startswith("nbtoolkit/"):
        if not is_bundled(name):
            raise ModelShapeError(f"model {name} is not a bundled tiny model of this nbtoolkit version")
        return tiny_config_fields(name), "bundled tiny model"
    return _hub(name)


def _hub(name: str) -> tuple[dict[str, Any], str]:
    """A config.json from the Hugging Face cache only: planning never waits on the network, and
    never imports transformers (and torch) into the kernel that shows the plan."""
    from huggingface_hub import try_to_load_from_cache

    try:
        cached = try_to_load_from_cache(name, "config.json")
    except ValueError:  # not a valid repo id
        cached = None
    if not isinstance(cached, str):
        raise ModelShapeError(
            f"model {name} could not be sized offline: it is not in the built-in table, not a local path, "
            f"and no config of it is in the Hugging Face cache; built-in: {', '.join(builtin_models())}"
        )
    return json.loads(Path(cached).read_text()), f"Hugging Face cache ({cached})"


# -- dataset size ----------------------------------------------------------------------------------


def train_samples(spec: RunSpec) -> int | None:
    """Training examples per epoch as far as known offline: max_train_samples caps what is found."""
    data = spec.dataset
    found: int | None = None
    if data.name:
        found = KNOWN_DATASET_SIZES.get((data.name, data.config)) or KNOWN_DATASET_SIZES.get((data.name, None))
    else:
        if data.files:
            files = data.files
        else:
            files = bundled_files(spec.task)
        train_file = Path(files.get(data.train_split, "")).expanduser()
        if train_file.suffix == ".jsonl" and train_file.is_file():
            with train_file.open("rb") as lines:
                found = sum(1 for line in lines if line.strip())
    if data.max_train_samples is not None:
        return min(found, data.max_train_samples) if found is not None else data.max_train_samples
    return found
