"""question-answering's data preview: each question with its context, in the order the program pairs them."""

from __future__ import annotations

from nbtoolkit.inputs.data_preview import TokenLengths, count, lengths_of, tokenizer_limit


def token_lengths(spec, sample, used: dict[str, str], tokenizer) -> list[TokenLengths]:
    """The program puts the question first for right-padding tokenizers."""
    pair = (used["question_column"], used["context_column"])
    first, second = pair if tokenizer.padding_side == "right" else pair[::-1]
    lengths = count(tokenizer, list(sample[first]), list(sample[second]))
    return [lengths_of("source", "dataset.max_length", lengths, spec.dataset.max_length, tokenizer_limit(tokenizer))]
