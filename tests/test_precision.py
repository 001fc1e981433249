"""Precision means what it says: a Qwen2-shaped checkpoint saved in bf16 loads, trains and is planned in the dtype the
spec asks for (transformers 5 would keep the checkpoint's bf16 whatever `precision:` said)."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors import safe_open
from transformers import AutoModelForCausalLM, AutoTokenizer, Qwen2Config

from nbtoolkit.api import launch
from nbtoolkit.inputs.bundled import tokenizer_dir
from nbtoolkit.planner.plan import plan
from nbtoolkit.spec import load_spec
from nbtoolkit.train.models import load_model


@pytest.fixture(scope="module")
def bf16_checkpoint(tmp_path_factory):
    """A tiny Qwen2 (grouped-query attention, gated FFN) saved in bf16 with the bundled chat tokenizer, as hub
    checkpoints of Qwen, Llama, Gemma and Mistral are."""
    path = tmp_path_factory.mktemp("qwen2-bf16")
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir("nbtoolkit/tiny-chat"))
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    torch.manual_seed(7)
    AutoModelForCausalLM.from_config(config).to(torch.bfloat16).save_pretrained(path)
    tokenizer.save_pretrained(path)
    assert json.loads((path / "config.json").read_text())["dtype"] == "bfloat16"
    return path


def _spec(path, precision: str, accelerator: str, adapter: str | None = None):
    spec = {
        "task": "causal-lm",
        "model": str(path),
        "precision": precision,
        "hardware": {"accelerator": accelerator},
        "train": {"max_steps": 3, "batch_size": 2, "logging_steps": 1},
    }
    return load_spec({**spec, "adapter": {"type": adapter}} if adapter else spec)


def _bytes_per_parameter(tensors) -> float:
    tensors = list(tensors)
    return sum(t.numel() * t.element_size() for t in tensors) / sum(t.numel() for t in tensors)


@pytest.mark.parametrize(
    ("precision", "accelerator", "adapter", "loaded"),
    [
        ("fp32", "cpu", None, torch.float32),  # fp32 trains fp32
        ("bf16", "cpu", None, torch.float32),  # mixed precision: fp32 master weights under autocast
        ("bf16", "cuda", None, torch.float32),
        ("bf16", "cuda", "lora", torch.bfloat16),  # a frozen base needs no master copy on a bf16 device
        ("fp16", "cuda", "lora", torch.float16),
        ("bf16", "cpu", "lora", torch.float32),  # on a CPU the base stays fp32
        ("fp32", "cuda", "lora", torch.float32),
    ],
)
def test_weights_load_in_the_planned_dtype(bf16_checkpoint, precision, accelerator, adapter, loaded):
    spec = _spec(bf16_checkpoint, precision, accelerator, adapter)
    model = load_model(AutoModelForCausalLM, spec, tokenizer=None)
    assert {p.dtype for p in model.parameters()} == {loaded}
    planned = plan(spec, alternatives=False)
    adapters = 4 * planned.trainable_params if adapter else 0  # adapters train in fp32 (PEFT casts them)
    assert (planned.memory.weights - adapters) / planned.params == _bytes_per_parameter(model.parameters())


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_a_lora_runs_task_head_trains_in_fp32_over_a_16_bit_base(bf16_checkpoint, precision):
    """A classifier's head (PEFT's modules_to_save) trains whole: PEFT casts its adapters to fp32, not the head, which
    stayed 16-bit over a 16-bit GPU base (no fp32 master weights; fp16 gradients the GradScaler refuses)."""
    from transformers import AutoModelForSequenceClassification

    from nbtoolkit.train.adapters import wrap

    spec = load_spec(
        {
            "task": "text-classification",
            "model": str(bf16_checkpoint),
            "precision": precision,
            "hardware": {"accelerator": "cuda"},
            "adapter": {"type": "lora"},
        }
    )
    model = load_model(AutoModelForSequenceClassification, spec, tokenizer=None, num_labels=3)
    wrapped = wrap(model, spec)
    trained = {name: p.dtype for name, p in wrapped.named_parameters() if p.requires_grad}
    assert any("score" in name for name in trained) and set(trained.values()) == {torch.float32}
    assert {p.dtype for p in wrapped.parameters() if not p.requires_grad} == {
        {"bf16": torch.bfloat16, "fp16": torch.float16}[precision]
    }


def test_qlora_computes_in_the_specs_precision():
    """bf16 as the QLoRA paper; fp16 where the GPU has none (a T4, which the planner refuses bf16 on)."""
    from nbtoolkit.train.models import quantized_loading

    for precision, dtype in (("bf16", torch.bfloat16), ("fp16", torch.float16), ("fp32", torch.float32)):
        options = quantized_loading(precision)
        assert options["quantization_config"].bnb_4bit_compute_dtype == dtype and options["dtype"] == dtype


def test_a_bf16_run_on_a_bf16_checkpoint_trains_and_saves_fp32_master_weights(bf16_checkpoint, store):
    """A real job: under bf16 autocast the trained weights stay fp32 (before, the bf16 checkpoint trained in bf16)."""
    job = launch(_spec(bf16_checkpoint, "bf16", "cpu"), store=store)
    assert job.wait(timeout=240) == "succeeded", job.logs()
    with safe_open(job.dir / "output" / "model" / "model.safetensors", "pt") as saved:
        assert {saved.get_slice(name).get_dtype() for name in saved.keys()} == {"F32"}  # noqa: SIM118  safe_open is not iterable
    records = [json.loads(line) for line in (job.dir / "metrics.jsonl").read_text().splitlines()]
    assert [record["loss"] for record in records if record["kind"] == "train"]
