"""The chat models' answer (chat, preference, grpo): the assistant's next turn."""

from __future__ import annotations

from nbtoolkit.train.errors import TrainError
from nbtoolkit.train.inference import MAX_NEW_TOKENS


def reply(spec, model, tokenizer, conversation: str | list) -> dict:
    """The assistant's next turn: the conversation rendered by the chat template the job trained and saved with."""
    from nbtoolkit.inputs.chat_formats import as_turns

    messages = as_turns(conversation, "user")
    if not all(isinstance(m, dict) and {"role", "content"} <= m.keys() for m in messages):
        raise TrainError(
            f"{spec.task} inputs are a text or a conversation (a list of {{'role': ..., 'content': ...}} "
            f"messages); got {str(conversation)[:80]!r}"
        )
    prompt = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    encoded = tokenizer(prompt, add_special_tokens=False, return_tensors="pt")
    output = model.generate(
        **encoded,
        max_new_tokens=MAX_NEW_TOKENS,
        do_sample=False,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    reply = tokenizer.decode(output[0, encoded["input_ids"].shape[1] :], skip_special_tokens=True)
    return {"reply": reply, "prompt": prompt}
