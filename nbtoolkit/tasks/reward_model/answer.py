"""reward-model's answer: the score of a reply."""

from __future__ import annotations

from nbtoolkit.train.errors import TrainError


def score(spec, model, tokenizer, item: str | list) -> dict:
    """A reward model's score for a reply, tokenized as TRL's RewardTrainer trained it: a conversation (ending
    with the reply) through the saved chat template, a text with the end token appended."""
    import torch

    conversation = isinstance(item, list) and all(isinstance(m, dict) and {"role", "content"} <= m.keys() for m in item)
    if not (conversation or isinstance(item, str)) or (conversation and (not item or item[-1]["role"] != "assistant")):
        raise TrainError(
            f"{spec.task} inputs are a text or a conversation (a list of {{'role': ..., 'content': ...}} messages) "
            f"ending with the assistant's reply to score; got {str(item)[:80]!r}"
        )
    if conversation:
        ids = tokenizer.apply_chat_template(item, tokenize=True, return_dict=True)["input_ids"]
    else:
        ids = tokenizer(item if item.endswith(tokenizer.eos_token) else item + tokenizer.eos_token)["input_ids"]
    longest = getattr(model.config, "max_position_embeddings", None)
    if longest is not None and len(ids) > longest:
        raise TrainError(
            f"the input is {len(ids)} tokens, past the {longest} positions the reward model reads; shorten it"
        )
    return {"score": model(input_ids=torch.tensor([list(ids)])).logits[0, 0].item()}
