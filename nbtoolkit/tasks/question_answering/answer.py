"""question-answering's answer: the best span of the context, over every window of it."""

from __future__ import annotations

from nbtoolkit.train.errors import TrainError


def extract_answer(spec, model, tokenizer, item: dict) -> dict:
    from nbtoolkit.tasks.question_answering.train import best_span

    if not isinstance(item, dict) or not {"question", "context"} <= item.keys():
        raise TrainError(
            f"question-answering inputs are {{'question': ..., 'context': ...}} dicts; got {str(item)[:80]!r}"
        )
    encoded = tokenizer(
        item["question"],
        item["context"],
        truncation="only_second",
        max_length=spec.dataset.max_length,
        stride=spec.dataset.doc_stride,
        return_overflowing_tokens=True,
        return_offsets_mapping=True,
        padding=True,
        return_tensors="pt",
    )
    offsets = encoded.pop("offset_mapping").tolist()
    encoded.pop("overflow_to_sample_mapping", None)
    output = model(**encoded)
    features = [
        (
            output.start_logits[index].numpy(),
            output.end_logits[index].numpy(),
            [
                tuple(offset) if part == 1 else None
                for offset, part in zip(offsets[index], encoded.sequence_ids(index), strict=False)
            ],
        )
        for index in range(len(offsets))
    ]
    answer, score = best_span(item["context"], features)
    return {"answer": answer, "score": score}
