"""text-classification's answer: the label and every label's probability."""

from __future__ import annotations


def classify(spec, model, tokenizer, text: str) -> dict:
    encoded = tokenizer(text, truncation=True, max_length=spec.dataset.max_length, return_tensors="pt")
    probabilities = model(**encoded).logits.softmax(-1)[0].tolist()
    names = [model.config.id2label[index] for index in range(len(probabilities))]
    best = max(range(len(names)), key=probabilities.__getitem__)
    return {"label": names[best], "probabilities": dict(zip(names, probabilities, strict=False))}
