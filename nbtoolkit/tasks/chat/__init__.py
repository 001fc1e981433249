"""chat: supervised fine-tuning on conversations (TRL's SFTTrainer), the loss on the assistant's turns."""

from typing import Any

from nbtoolkit.tasks import Task

#: what the chat, preference and grpo tasks share: a causal LM that replies in turns, trained by TRL
CHAT_MODEL: dict[str, Any] = {
    "bundled_model": "nbtoolkit/tiny-chat",
    "head": "causal-lm",
    "needs": "a decoder-only (chat) model such as qwen2, llama or gpt2",
    "pipeline_tag": "text-generation",
    "auto_model": "AutoModelForCausalLM",
    "peft_task_type": "CAUSAL_LM",
    "prompt": "your message to the model",
    "try_it": "chat",
    "answer": "nbtoolkit.tasks.chat.answer:reply",
    "trl": True,
}

TASK = Task(
    "chat",
    {},
    program="nbtoolkit.tasks.chat.train",
    **CHAT_MODEL,
    conversations=True,
    set_by_field={"max_length": "dataset.max_length", "packing": "dataset.packing"},
    listed=50,
)
