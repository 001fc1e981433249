"""A spec's training data before any run: first rows, columns, labels, and token lengths against the spec's cut.

The analysis the FLAN-T5 tutorial does by hand to choose its lengths: the longest prompted source
(capped at the tokenizer's limit) and the 95th percentile of the targets. Reads a sample of the
training split (a hub dataset is streamed: only the sample is fetched) with the training program's
own loader, column check and tokenizer; those heavy libraries load inside `preview_data` only.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from nbtoolkit import views
from nbtoolkit.inputs.chat_preview import Rendered, chat_sample, read_columns
from nbtoolkit.spec import RunSpec, load_spec
from nbtoolkit.tasks import TASKS, TRL_TASKS, columns_used, hook
from nbtoolkit.train.errors import TrainError

#: examples read from the training split (the first ones): enough for a histogram, quick to tokenize
DEFAULT_ROWS = 1000
SHOWN_ROWS = 5
#: the target length the tutorial keeps: 95% of summaries fit uncut
TARGET_PERCENTILE = 95
HISTOGRAM_BINS = 10
#: how a task treats examples longer than dataset.max_length, when it does not cut them
#: a tokenizer "limit" above this is transformers' placeholder for "none"
NO_LIMIT = 1_000_000


@dataclass(frozen=True)
class TokenLengths:
    """Token counts of one side of the examples (source or target) and where the spec cuts it."""

    side: str  # "source" or "target"
    field: str  # the spec field that cuts it: dataset.max_length or dataset.max_target_length
    lengths: list[int]
    cut_at: int | None  # None: nothing is cut (causal-lm packs texts into blocks)
    suggested: int | None

    @property
    def cut_share(self) -> float | None:
        """The share of examples longer than the cut (they lose tokens, or QA splits them into windows)."""
        if self.cut_at is None or not self.lengths:
            return None
        return sum(length > self.cut_at for length in self.lengths) / len(self.lengths)

    def quantiles(self) -> dict[str, int]:
        ordered = sorted(self.lengths)
        return {
            "min": ordered[0],
            "median": int(statistics.median(ordered)),
            f"p{TARGET_PERCENTILE}": percentile(ordered, TARGET_PERCENTILE),
            "max": ordered[-1],
        }

    def histogram(self, bins: int = HISTOGRAM_BINS) -> list[tuple[int, int, int]]:
        """(low, high, count) per bin of equal integer width from the shortest to the longest; low <= n < high."""
        shortest, longest = min(self.lengths), max(self.lengths)
        width = max(1, math.ceil((longest - shortest + 1) / bins))
        counts = Counter((length - shortest) // width for length in self.lengths)
        return [
            (shortest + index * width, shortest + (index + 1) * width, counts.get(index, 0))
            for index in range(bins)
            if shortest + index * width <= longest
        ]


@dataclass(frozen=True)
class DataPreview:
    """What the training program would read, summarised; `lines()` is the `nbtoolkit data` report."""

    task: str
    origin: str  # where the sample came from, in words
    columns: list[str]  # the columns found in the data
    used: dict[str, str]  # spec field -> the column it reads (checked to exist)
    rows: list[dict[str, Any]]  # the first SHOWN_ROWS examples
    sample_size: int
    label_counts: dict[str, int] | None  # classification only
    lengths: list[TokenLengths]
    model: str  # whose tokenizer counted the tokens
    note: str | None = None
    data_format: str | None = None  # chat, preference, grpo: the detected format (or the columns read)
    rendered: list[Rendered] = field(default_factory=list)  # ... the first rows through the chat template
    format_columns: list[str] = field(default_factory=list)  # ... and the columns that format reads
    warning: str | None = None  # chat: the end of turn never carries loss (chat_preview.untrained_end_of_turn)

    def lines(self) -> list[str]:
        found = [
            f"{self.task}: {self.sample_size} examples from {self.origin}",
            f"columns found: {', '.join(self.columns)}",
            "columns used: "
            + (
                ", ".join(f"dataset.{field} -> {name}" for field, name in self.used.items())
                or ", ".join(self.format_columns)
            ),
            f"first {len(self.rows)} rows:",
        ]
        found += ["  " + clip(" | ".join(f"{key}: {value}" for key, value in row.items()), 160) for row in self.rows]
        if self.data_format:
            found.append(f"format: {self.data_format}; as trained through the chat template ([[loss tokens]]):")
            found += ["  " + example.marked().replace("\n", "\n  ") for example in self.rendered]
        if self.label_counts is not None:
            found.append("label counts: " + ", ".join(f"{label} {count}" for label, count in self.label_counts.items()))
        for side in self.lengths:
            found.append(
                f"{side.side} tokens ({self.model}'s tokenizer): "
                + ", ".join(f"{name} {value}" for name, value in side.quantiles().items())
            )
            top = max(count for _, _, count in side.histogram())
            for low, high, count in side.histogram():
                cut = " <- cut" if side.cut_at is not None and low <= side.cut_at < high else ""
                found.append(f"  {low:>6}-{high - 1:<6} {'#' * round(30 * count / top):<30} {count}{cut}")
            if side.cut_share is not None:
                found.append(f"  {side.field} {side.cut_at}: {side.cut_share:.1%} of examples are longer")
            if side.suggested is not None:
                found.append(f"  suggested {side.field}: {side.suggested}")
        if self.note:
            found.append(self.note)
        if self.warning:
            found.append(f"warning: {self.warning}")
        return found

    def __str__(self) -> str:
        return "\n".join(self.lines())

    def _repr_html_(self) -> str:
        return views.view("data_preview")(self)


def preview_data(spec: RunSpec | dict | str, rows: int = DEFAULT_ROWS) -> DataPreview:
    """Load a sample of the spec's training split and measure it under the model's tokenizer.

    A wrong column mapping, missing files, or a model that cannot do the task raise TrainError with the
    training program's own sentence."""
    from nbtoolkit.inputs.data_files import check_files
    from nbtoolkit.lineage.chains import is_job_ref, resolve
    from nbtoolkit.runner import JobStore
    from nbtoolkit.train.data import column, load_sample
    from nbtoolkit.train.models import ensure_pad_token, load_tokenizer, model_config
    from nbtoolkit.train.pairing import check_pairing

    spec = load_spec(spec)
    if is_job_ref(spec.model):  # an earlier job's model: its folder here, else its base
        spec = resolve(spec, JobStore(), fetching=False).spec
    check_files(spec)  # a missing file, a broken line or a row the task cannot read, in one sentence
    check_pairing(spec, model_config(spec.model_name))  # an unreachable or unsuitable model, in one sentence
    with quiet_progress():
        sample = load_sample(spec, rows)
    if len(sample) == 0:
        raise TrainError(f"the dataset's '{spec.dataset.train_split}' split has no examples")
    if spec.task in TRL_TASKS:
        return chat_preview(spec, sample)
    used = {field: column(spec, sample, field) for field in columns_used(spec.task, spec.dataset)}
    tokenizer = load_tokenizer(spec.model_name)
    ensure_pad_token(tokenizer)
    label = used.get("label_column")
    return DataPreview(
        task=spec.task,
        origin=origin(spec),
        columns=list(sample.column_names),
        used=used,
        rows=[sample[index] for index in range(min(SHOWN_ROWS, len(sample)))],
        sample_size=len(sample),
        label_counts=label_counts(sample, label) if label else None,
        lengths=token_lengths(spec, sample, used, tokenizer),
        model=spec.model_name,
        note=TASKS[spec.task].preview_note.format(data=spec.dataset) or None,
    )


def chat_preview(spec: RunSpec, sample) -> DataPreview:
    """Chat, preference and grpo data: the format, the first rows as trained, token lengths after templating (a task's
    own rendering where it has one: its preview_sample)."""
    own = TASKS[spec.task].preview_sample
    if own:
        fmt, read, rendered, warning = hook(own)(spec, sample)
    else:
        fmt, rendered, warning = chat_sample(spec, sample)
        read = read_columns(spec.task, fmt)
    limit = spec.dataset.max_length
    return DataPreview(
        task=spec.task,
        origin=origin(spec),
        columns=list(sample.column_names),
        used={},
        rows=[sample[index] for index in range(min(SHOWN_ROWS, len(sample)))],
        sample_size=len(sample),
        label_counts=None,
        lengths=[lengths_of("source", "dataset.max_length", [example.tokens for example in rendered], limit, None)],
        model=spec.model_name,
        data_format=fmt,
        rendered=rendered[:SHOWN_ROWS],
        format_columns=read,
        warning=warning,
        note=TASKS[spec.task].preview_note.format(data=spec.dataset) or None,
    )


def token_lengths(spec: RunSpec, sample, used: dict[str, str], tokenizer) -> list[TokenLengths]:
    """Each side's lengths as the training program tokenizes them, uncut: the task's own count (its preview_lengths,
    nbtoolkit/tasks/<task>/preview.py)."""
    return hook(TASKS[spec.task].preview_lengths)(spec, sample, used, tokenizer)


def tokenizer_limit(tokenizer) -> int | None:
    """The tokenizer's longest input, None where it states none."""
    return tokenizer.model_max_length if tokenizer.model_max_length < NO_LIMIT else None


def lengths_of(side: str, field: str, lengths: list[int], cut_at: int, limit: int | None) -> TokenLengths:
    """A source's lengths with the tutorial's suggestion: the longest, within the model's limit (and the spec's 8)."""
    longest = max(lengths)
    return TokenLengths(side, field, lengths, cut_at, max(8, min(longest, limit) if limit else longest))


def count(tokenizer, texts: list[str], pairs: list[str] | None = None) -> list[int]:
    return [len(ids) for ids in tokenizer(texts, pairs)["input_ids"]]


def percentile(lengths: list[int], percent: float) -> int:
    """numpy's (linear) percentile rounded down, as the tutorial takes it."""
    import numpy as np

    return int(np.percentile(lengths, percent))


@contextmanager
def quiet_progress():
    """No datasets progress bars while loading the sample (the user's own setting comes back after)."""
    from datasets.utils import logging as datasets_logging

    was_enabled = datasets_logging.is_progress_bar_enabled()
    datasets_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_enabled:
            datasets_logging.enable_progress_bar()


def label_counts(sample, label: str) -> dict[str, int]:
    """Examples per label, most frequent first (ClassLabel ids shown as their names)."""
    names = getattr(sample.features[label], "names", None)
    counts = Counter(names[value] if names else str(value) for value in sample[label])
    return dict(counts.most_common())


def origin(spec: RunSpec) -> str:
    data = spec.dataset
    if data.name:
        return f"the hub dataset {data.name} (split {data.train_split}, streamed)"
    if data.files:
        return data.files.get(data.train_split, "the local files")
    return f"the bundled {spec.task} sample"


def clip(text: str, width: int) -> str:
    """At most `width` characters, with "..." where it was cut."""
    return text if len(text) <= width else text[: width - 3] + "..."
