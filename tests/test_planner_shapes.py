"""Model and dataset sizes without weights: published parameter counts, configs, transformers' own count."""

from __future__ import annotations

import json

import pytest

from nbtoolkit.planner.shapes import ModelShapeError, builtin_models, model_shape, shape_from_config, train_samples
from nbtoolkit.spec import load_spec

#: parameter counts as transformers reports them (`model.num_parameters()`) for the hub checkpoints
PUBLISHED = {
    "google/flan-t5-xl": 2_849_757_184,
    "google/flan-t5-xxl": 11_135_332_352,
    "google/flan-t5-base": 247_577_856,
    "t5-small": 60_506_624,
    "t5-11b": 11_307_321_344,
    "bert-base-uncased": 109_482_240,
    "bert-large-uncased": 335_141_888,
    "gpt2": 124_439_808,
    "gpt2-xl": 1_557_611_200,
}


@pytest.mark.parametrize(("name", "params"), PUBLISHED.items())
def test_parameter_counts_of_the_built_in_table(name, params):
    assert model_shape(name).params == params


def test_shapes_say_what_the_estimates_need():
    xxl = model_shape("google/flan-t5-xxl")
    assert (xxl.architecture, xxl.hidden_size, xxl.layers, xxl.decoder_layers, xxl.ffn_dim, xxl.gated_ffn) == (
        "encoder-decoder",
        4096,
        24,
        24,
        10240,
        True,
    )
    assert xxl.largest_layer_params == 32128 * 4096 and xxl.logits_on == "target"
    assert model_shape("google/t5-v1_1-xxl").params == xxl.params  # an alias
    assert model_shape("bert-base-cased").logits_on is None and model_shape("gpt2").logits_on == "input"
    assert "google/flan-t5-xl" in builtin_models()


def test_local_config_json_and_unknown_models(tmp_path):
    config = {
        "model_type": "llama",
        "hidden_size": 256,
        "num_hidden_layers": 4,
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
        "intermediate_size": 688,
        "vocab_size": 1000,
        "hidden_act": "silu",
    }
    (tmp_path / "config.json").write_text(json.dumps(config))
    shape = model_shape(str(tmp_path))
    attention = 2 * 256 * 256 + 2 * 256 * 64
    assert shape.params == 4 * (attention + 3 * 256 * 688 + 2 * 256) + 2 * 1000 * 256 + 256
    assert not shape.exact and shape.source.endswith("config.json")
    with pytest.raises(ModelShapeError, match="could not be sized offline"):
        model_shape("someone/not-a-model-here")
    with pytest.raises(ModelShapeError, match="has no config.json"):
        model_shape(str(tmp_path.parent))
    with pytest.raises(ModelShapeError, match="cannot size"):
        shape_from_config("bart", {"model_type": "bart", "is_encoder_decoder": True}, "test")


def test_counts_match_transformers_for_every_layout():
    """Build small models of each family with transformers and count their parameters the way DeepSpeed does."""
    import torch
    from transformers import AutoConfig, AutoModel, AutoModelForCausalLM, AutoModelForSeq2SeqLM

    small = {
        "t5": (
            "t5-small",
            dict(d_model=64, d_ff=256, d_kv=16, num_heads=4, num_layers=2, num_decoder_layers=3, vocab_size=500),
        ),
        "flan-t5": (
            "google/flan-t5-xxl",
            dict(d_model=64, d_ff=160, d_kv=8, num_heads=4, num_layers=2, num_decoder_layers=2, vocab_size=500),
        ),
        "bert": (
            "bert-base-uncased",
            dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128, vocab_size=500),
        ),
        "gpt2": ("gpt2", dict(n_embd=64, n_layer=2, n_head=2, vocab_size=500, n_positions=128)),
    }
    auto = {
        "t5": AutoModelForSeq2SeqLM,
        "flan-t5": AutoModelForSeq2SeqLM,
        "bert": AutoModel,
        "gpt2": AutoModelForCausalLM,
    }
    for family, (base, sizes) in small.items():
        config = AutoConfig.for_model(**{**_config_fields(base), **sizes})
        torch.manual_seed(0)
        model = auto[family].from_config(config)
        shape = shape_from_config(family, config.to_dict(), "test")
        assert shape.params == model.num_parameters(), family
        largest = max(sum(p.numel() for p in module.parameters(recurse=False)) for module in model.modules())
        assert shape.largest_layer_params == largest, family


def _config_fields(name: str) -> dict:
    from nbtoolkit.planner.shapes import _builtin

    entry = dict(_builtin()[name.lower()])
    entry.pop("canonical")
    return entry


def test_bundled_tiny_model_is_sized_from_its_config():
    shape = model_shape("nbtoolkit/tiny-bert")
    assert shape.model_type == "bert" and shape.hidden_size == 64 and shape.source == "bundled tiny model"
    with pytest.raises(ModelShapeError, match="not a bundled tiny model"):
        model_shape("nbtoolkit/tiny-nothing")


def test_training_examples_known_offline(tmp_path):
    cnn = {"task": "summarization", "dataset": {"name": "cnn_dailymail", "config": "3.0.0"}}
    assert train_samples(load_spec(cnn)) == 287_113
    cnn["dataset"]["max_train_samples"] = 1000
    assert train_samples(load_spec(cnn)) == 1000
    assert train_samples(load_spec({"task": "summarization", "dataset": {"name": "someone/else"}})) is None
    data = tmp_path / "train.jsonl"
    data.write_text('{"text": "a", "label": 0}\n{"text": "b", "label": 1}\n\n')
    local = {"task": "text-classification", "dataset": {"files": {"train": str(data)}}}
    assert train_samples(load_spec(local)) == 2
    bundled = train_samples(load_spec({"task": "text-classification"}))
    assert bundled is not None and bundled > 10


@pytest.mark.parametrize("model_type", ["gpt2", "bert", "t5"])
def test_a_config_cut_short_is_one_sentence_not_a_key_error(model_type):
    with pytest.raises(ModelShapeError, match=rf"^model saved \({model_type}\): its config has no '\w+' field, so"):
        shape_from_config("saved", {"model_type": model_type}, "config.json")
