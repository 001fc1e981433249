"""causal-lm's data preview: the non-empty texts, uncut (the program packs them into blocks afterwards)."""

from __future__ import annotations

from nbtoolkit.inputs.data_preview import TokenLengths, count
from nbtoolkit.train.errors import TrainError


def token_lengths(spec, sample, used: dict[str, str], tokenizer) -> list[TokenLengths]:
    texts = [text for text in list(sample[used["text_column"]]) if text and text.strip()]
    if not texts:
        raise TrainError(
            f"dataset.text_column '{used['text_column']}' holds only empty texts in the first {len(sample)} examples"
        )
    return [TokenLengths("source", "dataset.max_length", count(tokenizer, texts), None, None)]
