"""summarization's data preview: the prompted sources' lengths and the targets' (their 95th percentile suggested)."""

from __future__ import annotations

from nbtoolkit.inputs.data_preview import (
    TARGET_PERCENTILE,
    TokenLengths,
    count,
    lengths_of,
    percentile,
    tokenizer_limit,
)


def token_lengths(spec, sample, used: dict[str, str], tokenizer) -> list[TokenLengths]:
    data = spec.dataset
    template = data.prompt_template or "{input}"
    sources = [template.replace("{input}", text) for text in list(sample[used["text_column"]])]
    targets = [len(ids) for ids in tokenizer(text_target=list(sample[used["summary_column"]]))["input_ids"]]
    return [
        lengths_of(
            "source", "dataset.max_length", count(tokenizer, sources), data.max_length, tokenizer_limit(tokenizer)
        ),
        TokenLengths(
            "target",
            "dataset.max_target_length",
            targets,
            data.max_target_length,
            max(1, percentile(targets, TARGET_PERCENTILE)),
        ),
    ]
