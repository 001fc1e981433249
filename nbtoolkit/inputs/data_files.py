"""A spec's local data files, read row by row without `datasets`: every row checked for what its task reads.

Light (json and csv only), so `plan`, `run`, the form and `%%finetune` can refuse bad data in one
sentence naming the file, the row and the field before any process starts, instead of a job failing
20-30 s later with a traceback (a broken JSON line was a `DatasetGenerationError`, a pair without a
rejected answer an `AttributeError` deep in TRL, a conversation without a reply a template error).
Parquet files are checked for existence only (reading them needs pyarrow).
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Iterable, Iterator
from functools import lru_cache
from pathlib import Path
from typing import Any

from nbtoolkit.inputs.chat_formats import (
    FormatError,
    as_messages,
    as_turns,
    assistant_only_loss,
    detect_format,
    json_kind,
)
from nbtoolkit.inputs.image_files import image_problem
from nbtoolkit.spec_parts.blocks import DatasetSpec
from nbtoolkit.tasks import TASKS, columns_used, hook
from nbtoolkit.train.errors import TrainError

#: file suffix -> the `datasets` loader that reads it (the training program loads files with these)
FILE_FORMATS = {".json": "json", ".jsonl": "json", ".csv": "csv", ".parquet": "parquet"}
#: rows checked per file at most: enough to catch a bad row anywhere in any fine-tuning file people keep as JSON
MAX_ROWS = 1_000_000


class DataError(TrainError):
    """A data file that cannot train as the spec says; the message is one sentence."""


def check_files(spec) -> None:
    """Raise DataError with one sentence for the first problem in the spec's local data files (none: no files).
    A file's verdict is kept while it is unchanged (the form checks as the user types); the files its rows name
    (images) are looked for each time."""
    check_paths(spec.dataset.files or {})
    for where, problem, named in _verdicts(spec):
        if problem:
            raise DataError(problem)
        check_named_files(where, named)


def _verdicts(spec) -> Iterator[tuple[str, str | None, tuple[tuple[int, str], ...]]]:
    """(the file in words, its problem or None, the (row, file) its rows name) of each local JSON or CSV file."""
    reads = (spec.task, spec.dataset.model_dump_json(), assistant_only_loss(spec.task, spec.extra))
    for split, name in (spec.dataset.files or {}).items():
        path = Path(name).expanduser()
        if path.suffix.lower() != ".parquet" and path.is_file():
            status = path.stat()
            where = f"dataset.files.{split} ({name})"
            yield where, *_file_verdict(where, str(path), status.st_mtime_ns, status.st_size, *reads)


def files_not_shipped(spec, backend: str) -> str | None:
    """A remote backend's job receives the spec's data files alone, not the files their rows name (a vision row's
    images), and failed on the first one after its paid machine started: the first such file, as one sentence.
    Only a task with its own `check_row` names files: another's rows are not read here."""
    if not TASKS[spec.task].check_row:
        return None
    where, number, name = next(((where, *pair) for where, _, named in _verdicts(spec) for pair in named), ("", 0, ""))
    if not name:
        return None
    return (
        f"{where}: row {number} names {name}, a file on this machine that a {backend} job does not receive (only "
        "the data files are shipped); push the dataset with its images to the Hugging Face Hub (an Image column) "
        "and set dataset.name, or train on this machine (hardware.target: local)"
    )


@lru_cache(maxsize=64)
def _file_verdict(
    where: str, path: str, _mtime_ns: int, _size: int, task: str, dataset: str, assistant_only: bool
) -> tuple[str | None, tuple[tuple[int, str], ...]]:
    """(the file's problem or None, the (row, file) its rows name)."""
    try:
        named = check_rows(
            task, DatasetSpec.model_validate_json(dataset), assistant_only, where, rows(Path(path), where), folder(path)
        )
    except DataError as exc:
        return str(exc), ()
    return None, tuple(named)


def check_file(spec, path: Path, where: str) -> None:
    """Raise DataError for the first row of a file beside the spec's own (Job.evaluate's) that the spec's task
    cannot read, as check_files checks the spec's files; `where` names the file in the sentence."""
    if path.suffix.lower() not in FILE_FORMATS:
        raise DataError(f"{where}: {path.suffix} files are not supported; use {', '.join(FILE_FORMATS)}")
    if path.suffix.lower() != ".parquet":
        read = rows(path, where)
        check_named_files(
            where,
            check_rows(spec.task, spec.dataset, assistant_only_loss(spec.task, spec.extra), where, read, folder(path)),
        )


def check_named_files(where: str, named: Iterable[tuple[int, str]]) -> None:
    """Each file a row names (a vision row's image) is there and opens as an image (nbtoolkit.inputs.image_files)."""
    for number, name in named:
        if not Path(name).is_file():
            raise DataError(
                f"{where}: row {number} names {name}, which does not exist; give each file's path relative to the "
                "data file's folder (or absolute)"
            )
        problem = image_problem(name)
        if problem:
            raise DataError(f"{where}: row {number} names {name}, which {problem}; replace the file or remove the row")


def check_paths(files: dict[str, str]) -> None:
    """Every split's file exists, in one format `datasets` reads."""
    suffixes = {Path(path).suffix.lower() for path in files.values()}
    unknown = suffixes - FILE_FORMATS.keys()
    if unknown:
        raise DataError(
            f"dataset.files: {', '.join(sorted(unknown))} files are not supported; use {', '.join(FILE_FORMATS)}"
        )
    if len(suffixes) > 1:
        raise DataError("dataset.files mixes formats; give every split in the same format")
    for split, name in files.items():
        if not Path(name).expanduser().is_file():
            raise DataError(f"dataset.files.{split}: {name} does not exist (or is not a file); give the path of a file")


def rows(path: Path, where: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """(row number from 1, row) of a JSON array, a JSON Lines or a CSV file, as `datasets` reads them: a leading
    byte order mark skipped, lines split at line ends only (a JSON string or CSV cell may hold U+2028, which
    `str.splitlines` would split at), and an empty CSV cell null (pandas reads it as NaN)."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(
            f"{where} cannot be read ({exc.__class__.__name__}: {exc}); give a readable UTF-8 file"
        ) from None
    if path.suffix.lower() == ".csv":
        reader = csv.DictReader(io.StringIO(text, newline=""))
        for number, row in enumerate(reader, 1):
            if None in row:  # cells past the header's: pandas stops the file there ("Expected 2 fields ..., saw 3")
                raise DataError(
                    f"{where}: row {number} has {len(reader.fieldnames or []) + len(row[None])} cells but the header "
                    f"names {len(reader.fieldnames or [])} columns; quote a cell that holds a comma, or fix the row"
                )
            yield number, {column: None if value == "" else value for column, value in row.items()}
        return
    stripped = text.lstrip()
    if stripped.startswith("["):
        try:
            whole = json.loads(text)  # datasets reads an array with json, which keeps a repeated key's last value
        except json.JSONDecodeError as exc:
            raise DataError(f"{where} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
        yield from _objects(enumerate(whole, 1), where)
        return
    yield from _objects(_json_lines(text, where), where)


class _KeyTwice(ValueError):
    """A JSON Lines object with a key twice: json keeps the last, but Arrow, which datasets reads JSON Lines with,
    fails on the whole file ("Column(/text) was specified twice")."""


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found = dict(pairs)
    if len(found) < len(pairs):
        raise _KeyTwice(next(key for index, (key, _) in enumerate(pairs) if key in dict(pairs[:index])))
    return found


def _json_lines(text: str, where: str) -> Iterator[tuple[int, Any]]:
    number = 0
    for line_number, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        number += 1
        try:
            yield number, json.loads(line, object_pairs_hook=_unique_keys)
        except json.JSONDecodeError as exc:
            raise DataError(
                f"{where}: line {line_number} is not valid JSON (column {exc.colno}: {exc.msg}); "
                "each line must be one JSON object: fix or remove that line"
            ) from None
        except _KeyTwice as exc:
            raise DataError(
                f"{where}: line {line_number} has the key '{exc}' twice in one object (datasets cannot read the file "
                "then); keep one"
            ) from None


def _objects(numbered, where: str) -> Iterator[tuple[int, dict[str, Any]]]:
    for number, row in numbered:
        if number > MAX_ROWS:
            return
        if not isinstance(row, dict):
            raise DataError(f"{where}: row {number} is {json_kind(row)}, not an object of columns")
        yield number, row


def folder(path: str | Path) -> Path:
    """The folder a data file's rows name their files from (images beside the data)."""
    return Path(path).expanduser().resolve().parent


def check_rows(
    task: str, dataset, assistant_only: bool, where: str, numbered: Iterator[tuple[int, dict]], files_from: Path
) -> list[tuple[int, str]]:
    """Every row has what the task reads: a column mapping's columns (`dataset`, a spec's dataset block), a chat
    format's conversation with a turn that trains (`assistant_only`: the loss is on replies), preference pairs with
    both answers, or what the task's own `check_row` asks. Returns the (row, file) its rows name, found from
    `files_from` (the task's `check_row` says which)."""
    fmt = None
    first: dict[str, tuple[int, Any]] = {}  # column -> the first row's number and value
    number = 0
    named: list[tuple[int, str]] = []
    check_row = hook(TASKS[task].check_row) if TASKS[task].check_row else None
    if check_row is not None:  # it reads each row as the job will: with every column of the file
        numbered, columns = file_columns(numbered)
    for number, row in numbered:
        at = f"{where}: row {number}"
        if check_row is not None:
            whole = {**columns, **row}
            named += [(number, name) for name in check_row(whole, number, dataset, where, files_from)]
        elif TASKS[task].conversations:
            fmt = fmt or _format(dataset.format, row, at)
            _check_conversation(row, fmt, number, at, assistant_only)
        elif TASKS[task].row_columns:  # preference, grpo: texts or conversations in fixed columns
            wanted = TASKS[task].row_columns
            for column in wanted:
                _check_turns(row, column, task, at)
            _check_same_kind(row, wanted, number, at, first.setdefault(wanted[0], (number, row[wanted[0]])))
        else:
            for field, column in columns_used(task, dataset).items():
                _check_value(row, field, column, at, first.setdefault(column, (number, row.get(column))))
    if number == 0:
        raise DataError(f"{where} holds no rows; give a file with at least one row")
    return named


def file_columns(
    numbered: Iterable[tuple[int, dict[str, Any]]],
) -> tuple[list[tuple[int, dict[str, Any]]], dict[str, None]]:
    """The rows, and every column any of them has (each None): `datasets` reads a JSON file with the union of its
    rows' keys as columns, a key a row lacks null in that row."""
    read = list(numbered)
    return read, dict.fromkeys(key for _, row in read for key in row)


def _check_value(row: dict[str, Any], field: str, column: str, at: str, first: tuple[int, Any]) -> None:
    """A column the task reads is there, a finite number if a number, and of the first row's type: `datasets`
    reads a column of mixed types as JSON texts, and a NaN label as a class of its own, so either would train
    on nonsense without an error."""
    value = row.get(column)
    if value is None:
        have = ", ".join(key for key, held in row.items() if held is not None) or "no columns"
        raise DataError(
            f"{at} has no '{column}' (dataset.{field}; the row has {have}); "
            f"fill it, remove the row, or set dataset.{field} to the column that holds it"
        )
    if isinstance(value, float) and not math.isfinite(value):
        raise DataError(
            f"{at}'s '{column}' (dataset.{field}) is {json.dumps(value)}; give a finite number, or remove the row"
        )
    first_number, first_value = first
    if json_kind(value) != json_kind(first_value):
        raise DataError(
            f"{at}'s '{column}' (dataset.{field}) is {json_kind(value)}, but row {first_number}'s is "
            f"{json_kind(first_value)}; give it the same type in every row"
        )


def _check_same_kind(row: dict[str, Any], columns: tuple[str, ...], number: int, at: str, first: tuple[int, Any]):
    """Every column a TRL row reads is a text or every one a conversation, as in the first row: TRL reads a row as
    conversational or not from its prompt and fails on a mix (`can only concatenate str (not "list") to str`)."""
    first_number, first_value = first  # row 1's first column (its prompt)
    wanted = _kind(first_value)
    for column in columns:
        if _kind(row[column]) != wanted:
            whose = columns[0] if first_number == number else f"row {first_number}'s {columns[0]}"
            raise DataError(
                f"{at}'s {column} is {_kind(row[column])} but {whose} is {wanted}; give every "
                f"{', '.join(columns)} as texts, or every one as conversations"
            )


def _kind(value: Any) -> str:
    return "a conversation" if isinstance(value, list) else "a text"


def _format(declared: str, row: dict[str, Any], at: str) -> str:
    try:
        return detect_format([key for key, value in row.items() if value is not None], declared)
    except FormatError as exc:
        raise DataError(f"{at}: {exc}") from None


def _check_conversation(row: dict[str, Any], fmt: str, number: int, at: str, assistant_only: bool) -> None:
    try:
        messages = as_messages(row, fmt, number)
    except (FormatError, KeyError) as exc:
        reason = str(exc) if isinstance(exc, FormatError) else f"it has no {exc} column, as the first rows did"
        raise DataError(f"{at.rpartition(': row')[0]}: {reason}") from None
    if assistant_only and not any(m["role"] == "assistant" for m in messages):
        raise DataError(
            f"{at} has no assistant turn, so nothing in it trains (the loss is on the assistant's replies); "
            "add the reply, remove the row, or set extra: {assistant_only_loss: false}"
        )


def _check_turns(row: dict[str, Any], column: str, task: str, at: str) -> None:
    value = row.get(column)
    if value is None:
        raise DataError(
            f"{at} has no '{column}'; {task} rows need {', '.join(TASKS[task].row_columns)} "
            "(texts or conversations): fill it or remove the row"
        )
    try:
        as_turns(value, "user", f"{at}'s {column}")
    except FormatError as exc:
        raise DataError(str(exc)) from None
