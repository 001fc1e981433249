"""summarization's answer: a summary generated from the prompted article."""

from __future__ import annotations

from nbtoolkit.train.inference import MAX_NEW_TOKENS


def summarize(spec, model, tokenizer, text: str) -> dict:
    from nbtoolkit.tasks.summarization.train import prompted

    source = prompted(tokenizer, [text], spec.dataset.prompt_template, spec.dataset.max_length)[0]
    encoded = tokenizer(source, truncation=True, max_length=spec.dataset.max_length, return_tensors="pt")
    output = model.generate(**encoded, max_new_tokens=min(spec.dataset.max_target_length, MAX_NEW_TOKENS))
    return {"summary": tokenizer.decode(output[0], skip_special_tokens=True)}
