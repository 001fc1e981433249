"""vision-chat: supervised fine-tuning of a vision-language model on conversations with images (TRL's SFTTrainer and
the model's processor), LoRA on the language model with the vision tower frozen."""

from nbtoolkit.tasks import Task

TASK = Task(
    "vision-chat",
    {},
    "nbtoolkit/tiny-vlm",
    "image-text-to-text",
    "a vision-language model with a chat template, such as gemma3, qwen2_5_vl, llava or idefics3",
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
    # TRL 1.16 refuses the assistant-only loss on images below it (trl/trainer/sft_trainer.py:788-796)
    requires=("transformers>=5.18.0",),
    listed=90,
)
