"""The rows a rehearsal trains on: a few of the spec's own local files, else of the task's bundled sample with the
spec's column names, repeated to make enough examples for every rank."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

from nbtoolkit.inputs.bundled import bundled_files
from nbtoolkit.spec import RunSpec
from nbtoolkit.tasks import TASKS, columns_used

SAMPLE_ROWS = {"train": 64, "validation": 16}
#: characters per token that the bundled tokenizers stay under on English text (measured on the causal-lm
#: sample: 4.9-5.2 on average, 6.0 for the worst row): a causal-lm row this many characters per block
#: token packs into at least one block
CHARS_PER_TOKEN_BOUND = 8


def sample_rows(spec: RunSpec, notes: list[str], examples: int) -> tuple[dict[str, list[dict[str, Any]]], Path]:
    """A few rows per split with the spec's column names (its own local files, else the bundled sample), enough for
    `examples` training examples in each, and the folder they come from."""
    files = spec.dataset.files
    if (
        files
        and all(Path(path).expanduser().is_file() for path in files.values())
        and all(path.endswith(".jsonl") for path in files.values())
    ):
        rows = {
            split: _enough(spec, _rows(Path(path).expanduser(), SAMPLE_ROWS.get(split, 16)), examples)
            for split, path in files.items()
        }
        return rows, Path(next(iter(files.values()))).expanduser().resolve().parent
    if spec.dataset.name:
        notes.append(
            f"the hub dataset {spec.dataset.name} is not read here: its columns are rehearsed on the bundled "
            f"{spec.task} sample, renamed to the spec's"
        )
    elif files:
        notes.append(
            "dataset.files are not all local .jsonl files: the bundled sample stands in, with the spec's column names"
        )
    renames = {
        default: chosen
        for field, chosen in columns_used(spec.task, spec.dataset).items()
        if (default := _bundled_column(spec.task, field)) and default != chosen
    }
    bundled = bundled_files(spec.task)
    splits = {spec.dataset.train_split: "train"}
    if spec.dataset.eval_split:
        splits[spec.dataset.eval_split] = "validation"
    rows = {
        split: _enough(
            spec,
            [
                {renames.get(key, key): value for key, value in row.items()}
                for row in _rows(Path(bundled[source]), SAMPLE_ROWS[source])
            ],
            examples,
        )
        for split, source in splits.items()
    }
    return rows, Path(bundled["train"]).parent


def _enough(spec: RunSpec, rows: list[dict[str, Any]], examples: int) -> list[dict[str, Any]]:
    """The rows repeated until they make `examples` examples: a task that packs texts into blocks of
    dataset.max_length tokens (causal-lm) gets rows of texts joined to fill at least one block each."""
    if not TASKS[spec.task].packs_texts:
        return list(itertools.islice(itertools.cycle(rows), max(examples, len(rows))))
    column = columns_used(spec.task, spec.dataset)["text_column"]
    found = [row[column] for row in rows if str(row.get(column) or "").strip()]
    if not found:  # no text at all: the training program says so in its own sentence
        return rows
    texts = itertools.cycle(found)
    block_chars = CHARS_PER_TOKEN_BOUND * spec.dataset.max_length
    long_rows = []
    for _ in range(examples):
        parts: list[str] = []
        while sum(map(len, parts)) < block_chars:
            parts.append(next(texts))
        long_rows.append({column: "\n".join(parts)})
    return long_rows


def _bundled_column(task: str, field: str) -> str | None:
    return TASKS[task].columns.get(field)


def _rows(path: Path, count: int) -> list[dict[str, Any]]:
    with open(path) as handle:
        return [json.loads(line) for line, _ in zip(handle, range(count), strict=False)]
