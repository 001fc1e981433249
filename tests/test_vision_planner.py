"""The planner's vision-language row: the vision tower and projector counted as transformers builds them, the image
tokens per image as the processor makes them (numbers taken from the built models, not from the planner's formula)."""

from __future__ import annotations

import pytest

from nbtoolkit.planner import plan
from nbtoolkit.planner.shapes import _builtin, model_shape


def counted(model) -> tuple[int, int]:
    """(all parameters, the vision tower's and the projector's) of a built Gemma 3 model."""
    inner = model.model
    vision = [*inner.vision_tower.parameters(), *inner.multi_modal_projector.parameters()]
    return sum(p.numel() for p in model.parameters()), sum(p.numel() for p in vision)


def test_the_tiny_vision_model_as_built_and_as_its_processor_tokenizes():
    from PIL import Image
    from transformers import AutoModelForImageTextToText

    from nbtoolkit.tasks.vision_chat.train import load_processor
    from nbtoolkit.train.models import load_tokenizer, tiny_config

    shape = model_shape("nbtoolkit/tiny-vlm")
    _, vision = counted(
        AutoModelForImageTextToText.from_config(tiny_config("nbtoolkit/tiny-vlm", load_tokenizer("nbtoolkit/tiny-vlm")))
    )
    assert shape.vision_params == vision == 24_480
    processor = load_processor("nbtoolkit/tiny-vlm")
    encoded = processor(text="<start_of_image>", images=[Image.new("RGB", (48, 48))])
    assert list(encoded["input_ids"][0]).count(processor.tokenizer.image_token_id) == shape.image_tokens == 4
    assert shape.image_patches == (28 // 7) ** 2


def test_gemma_3_4b_counts_its_vision_tower_exactly_and_256_tokens_per_image():
    import torch
    from transformers import AutoConfig, AutoModelForImageTextToText

    fields = {
        key: value for key, value in _builtin()["google/gemma-3-4b-it"].items() if key not in ("canonical", "aliases")
    }
    with torch.device("meta"):
        model = AutoModelForImageTextToText.from_config(AutoConfig.for_model(fields.pop("model_type"), **fields))
    total, vision = counted(model)
    shape = model_shape("google/gemma-3-4b-it")
    assert shape.vision_params == vision  # 419,816,304: SigLIP's 27 layers at 1152 wide, and the projector
    assert shape.params == pytest.approx(total, rel=1e-3)  # the language model is estimated (its norms left out)
    assert (shape.image_patches, shape.image_tokens) == ((896 // 14) ** 2, 256)


def test_the_plan_says_the_tower_and_tokens_per_image():
    spec = {
        "task": "vision-chat",
        "model": "google/gemma-3-4b-it",
        "precision": "bf16",
        "adapter": {"r": 16},
        "hardware": {"accelerator": "cuda", "instance_type": "g5.2xlarge"},
        "train": {"batch_size": 2},
    }
    vision = plan(spec, alternatives=False)
    assert "(vision tower and projector 419.8M; 256 tokens per image)" in vision.summary_lines()[0]
    assert (vision.vision_params, vision.image_tokens) == (419_816_304, 256)


#: google/gemma-3-4b-it's SigLIP tower, by hand from its config (model_configs.yaml: 27 layers, 1152 wide, MLP 4304,
#: 896 px images in 14 px patches, no pooling head): per layer 4(d² + d) attention + (d·4304 + 4304) + (4304·d + d)
#: MLP + 4d two norms = 15,239,504; x27 = 411,466,608; + 2d last norm + 3·14²·d + d patch convolution + 64²·d
#: positions = 416,866,032. Its projector (1152·2560 + 1152 = 2,950,272) is not frozen: vision-chat freezes the tower
GEMMA_3_4B_TOWER = 416_866_032


def full_fine_tune(parallelism: dict, instance: str = "p4d.24xlarge", task: str = "vision-chat") -> dict:
    return {
        "task": task,
        "model": "google/gemma-3-4b-it",
        "precision": "bf16",
        "hardware": {"accelerator": "cuda", "instance_type": instance},
        "parallelism": parallelism,
        "train": {"batch_size": 1},
    }


def test_the_program_freezes_the_tower_alone_as_counted_by_hand():
    import torch
    from transformers import AutoConfig, AutoModelForImageTextToText

    from nbtoolkit.tasks.vision_chat.train import vision_tower

    fields = {
        key: value for key, value in _builtin()["google/gemma-3-4b-it"].items() if key not in ("canonical", "aliases")
    }
    with torch.device("meta"):
        model = AutoModelForImageTextToText.from_config(AutoConfig.for_model(fields.pop("model_type"), **fields))
    vision_tower(model).requires_grad_(False)
    frozen = sum(p.numel() for p in model.parameters() if not p.requires_grad)
    assert frozen == GEMMA_3_4B_TOWER
    assert all(p.requires_grad for p in model.model.multi_modal_projector.parameters())


@pytest.mark.parametrize(
    ("parallelism", "weights", "gradients", "optimizer"),
    [
        # PyTorch: fp32 weights 4Ψ, gradients 4Ψ_t, AdamW moments 8Ψ_t, on each of the 8 devices
        ({"strategy": "ddp"}, 4, 4, 8),
        # ZeRO-1: 2Ψ bf16 weights, 2Ψ_t bf16 gradients whole; 4Ψ_t/8 fp32 gradients and 12Ψ_t/8 fp32 states
        ({"strategy": "deepspeed", "zero_stage": 1}, 2, 2 + 4 / 8, 12 / 8),
        # ZeRO-2: gradients partitioned too
        ({"strategy": "deepspeed", "zero_stage": 2}, 2, (2 + 4) / 8, 12 / 8),
        # ZeRO-3: weights partitioned (2Ψ/8), no 16-bit gradients kept whole
        ({"strategy": "deepspeed", "zero_stage": 3}, 2 / 8, 4 / 8, 12 / 8),
        # ZeRO-3, optimizer on the host: gradients and states leave the device
        ({"strategy": "deepspeed", "zero_stage": 3, "offload_optimizer": "cpu"}, 2 / 8, 0, 0),
    ],
)
def test_a_full_fine_tune_charges_gradients_and_optimizer_for_the_trainable_parameters_only(
    parallelism, weights, gradients, optimizer
):
    result = plan(full_fine_tune(parallelism), alternatives=False)
    params = result.params
    trainable = params - GEMMA_3_4B_TOWER
    assert result.trainable_params == trainable
    assert result.memory.weights == pytest.approx(weights * params, abs=1)
    assert result.memory.gradients == pytest.approx(gradients * trainable, abs=1)
    assert result.memory.optimizer == pytest.approx(optimizer * trainable, abs=1)
    if parallelism.get("offload_optimizer"):  # the host holds 16 bytes per trainable parameter, x1.5
        assert result.host_bytes == pytest.approx(16 * trainable * 1.5, rel=1e-6)
        assert "Ψ_t" not in result.formula.split(" (DeepSpeed")[0]
    else:
        assert "Ψ_t" in result.formula


def test_the_tower_alone_saves_12_bytes_per_frozen_parameter_in_a_plain_full_fine_tune():
    single = full_fine_tune({"strategy": "ddp"}, instance="p5.48xlarge")
    vision = plan(single, alternatives=False)
    text = plan({**single, "task": "chat"}, alternatives=False)
    saved = text.memory.gradients + text.memory.optimizer - vision.memory.gradients - vision.memory.optimizer
    assert saved == pytest.approx(12 * GEMMA_3_4B_TOWER, abs=2)  # 4.66 GiB
    assert "4Ψ + 12Ψ_t" in vision.formula


def test_a_text_task_on_a_vision_language_model_says_it_loads_the_tower_but_reads_no_images():
    text = plan(full_fine_tune({"strategy": "ddp"}, task="chat"), alternatives=False)
    line = text.summary_lines()[0]
    assert "(vision tower and projector 419.8M; loaded but unused: this task reads no images)" in line
    assert "tokens per image" not in line and text.image_tokens == 0
    assert "Ψ_t" not in text.formula  # nothing frozen: every parameter trains
