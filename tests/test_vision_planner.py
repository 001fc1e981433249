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
