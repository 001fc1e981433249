"""causal-lm's answer: the text continued greedily."""

from __future__ import annotations

from nbtoolkit.train.inference import MAX_NEW_TOKENS


def continue_text(spec, model, tokenizer, text: str) -> dict:
    encoded = tokenizer(text, return_tensors="pt")
    output = model.generate(
        **encoded, max_new_tokens=MAX_NEW_TOKENS, do_sample=False, pad_token_id=tokenizer.pad_token_id
    )
    return {"continuation": tokenizer.decode(output[0, encoded["input_ids"].shape[1] :], skip_special_tokens=True)}
