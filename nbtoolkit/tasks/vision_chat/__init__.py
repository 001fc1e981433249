"""vision-chat: supervised fine-tuning of a vision-language model on conversations with images (TRL's SFTTrainer and
the model's processor), LoRA on the language model with the vision tower frozen."""

from pathlib import Path

from nbtoolkit.tasks import Task, TaskWorkload, TinyModel

#: its sample (data/: TRL's jsonl and LLaVA's JSON, with their images) and its tiny model's processor (processor/),
#: written by tools/build_assets.py
ASSETS = Path(__file__).resolve().parent / "assets"

# Gemma 3's layout (SigLIP vision tower, average-pooled to mm_tokens_per_image soft tokens per image, Gemma 3 language
# model) with the ChatML tokenizer and its image tokens. Gemma 3 rather than Qwen2.5-VL: transformers 5.23's Qwen2-VL
# processors need torchvision (their video processor), which nbtoolkit's lock has not; Gemma 3's processor runs on
# Pillow alone
TINY_VLM = TinyModel(
    ASSETS / "processor",
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
)

TASK = Task(
    "vision-chat",
    {},
    "nbtoolkit/tiny-vlm",
    "image-text-to-text",
    "a vision-language model with a chat template, such as gemma3 or llava (the types the planner sizes)",
    "nbtoolkit.tasks.vision_chat.train",
    pipeline_tag="image-text-to-text",
    auto_model="AutoModelForImageTextToText",
    peft_task_type="CAUSAL_LM",
    prompt="your message about the image",
    answer="nbtoolkit.tasks.vision_chat.answer:reply",
    try_it="chat-with-images",
    trl=True,
    set_by_field={"max_length": "dataset.max_length"},
    preview_sample="nbtoolkit.tasks.vision_chat.preview:preview_sample",
    spec_rule="nbtoolkit.tasks.vision_chat.rules:problem",
    check_row="nbtoolkit.tasks.vision_chat.formats:check_row",
    check_lengths="nbtoolkit.tasks.vision_chat.lengths:check_lengths",
    # TRL 1.16 refuses the assistant-only loss on images below it (trl/trainer/sft_trainer.py:788-796)
    requires=("transformers>=5.18.0",),
    assets=ASSETS,
    tiny_model=TINY_VLM,
    workload="nbtoolkit.tasks.vision_chat:workload",
    listed=90,
)


def workload(spec) -> TaskWorkload:
    """Its training program freezes the vision tower (train.py's `vision_tower(model).requires_grad_(False)`)."""
    return TaskWorkload(frozen_vision_tower=True)
