"""text-classification's data preview: each text (with its pair, where the spec names one)."""

from __future__ import annotations

from nbtoolkit.inputs.data_preview import TokenLengths, count, lengths_of, tokenizer_limit


def token_lengths(spec, sample, used: dict[str, str], tokenizer) -> list[TokenLengths]:
    pair = used.get("text_pair_column")
    lengths = count(tokenizer, list(sample[used["text_column"]]), list(sample[pair]) if pair else None)
    return [lengths_of("source", "dataset.max_length", lengths, spec.dataset.max_length, tokenizer_limit(tokenizer))]
