"""Loading a run's examples: bundled samples, local files, or a hub dataset; checking columns."""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path

from datasets import Dataset, DatasetDict, load_dataset
from datasets.exceptions import DatasetNotFoundError

from nbtoolkit.hardware.catalog import CatalogError
from nbtoolkit.hardware.catalog import instance as catalog_instance
from nbtoolkit.inputs.bundled import bundled_files
from nbtoolkit.inputs.data_files import FILE_FORMATS, check_paths
from nbtoolkit.spec import RunSpec
from nbtoolkit.tasks import TASKS
from nbtoolkit.train.errors import TrainError

#: below this many rows per worker, starting map workers costs more than it saves
ROWS_PER_MAP_WORKER = 1000


def load_splits(spec: RunSpec) -> DatasetDict:
    """Train and (optional) eval splits, trimmed to max_*_samples."""
    data = spec.dataset
    if data.name:
        with _hub_errors(data.name):
            splits = load_dataset(data.name, data.config)
    else:
        files = data.files or bundled_files(spec.task)
        splits = _load_files(files)
    result = DatasetDict()
    result["train"] = _split(splits, data.train_split, data.max_train_samples)
    if data.eval_split and data.eval_split in splits:
        result["eval"] = _split(splits, data.eval_split, data.max_eval_samples)
    return result


def load_sample(spec: RunSpec, rows: int) -> Dataset:
    """The first `rows` examples of the training split (fewer if max_train_samples says so).

    A hub dataset is streamed: only those rows are fetched, never the whole dataset.
    """
    data = spec.dataset
    rows = min(rows, data.max_train_samples or rows)
    if not data.name:
        return _split(_load_files(data.files or bundled_files(spec.task)), data.train_split, rows)
    with _hub_errors(data.name):
        stream = load_dataset(data.name, data.config, split=data.train_split, streaming=True)
        return Dataset.from_list(list(stream.take(rows)), features=stream.features)  # ClassLabel names kept


@contextmanager
def _hub_errors(name: str):
    """A hub dataset that cannot be loaded, in one sentence."""
    try:
        yield
    except (ConnectionError, DatasetNotFoundError) as exc:
        raise TrainError(
            f"dataset.name '{name}' could not be loaded ({str(exc).splitlines()[0]}); "
            "check the name, or give local files in dataset.files"
        ) from None


def _load_files(files: dict[str, str]) -> DatasetDict:
    check_paths(files)
    suffix = Path(next(iter(files.values()))).suffix.lower()
    return load_dataset(FILE_FORMATS[suffix], data_files={k: str(Path(v).expanduser()) for k, v in files.items()})


def _split(splits: DatasetDict, name: str, limit: int | None) -> Dataset:
    if name not in splits:
        raise TrainError(f"the dataset has no '{name}' split; it has {', '.join(splits)}")
    split = splits[name]
    return split.select(range(min(limit, len(split)))) if limit else split


def column(spec: RunSpec, dataset: Dataset, field: str) -> str:
    """The column a spec field names (or the task's default, nbtoolkit.tasks), checked against the data."""
    data = spec.dataset
    name = getattr(data, field) or TASKS[spec.task].columns[field]
    if name not in dataset.column_names:
        raise TrainError(
            f"dataset.{field} '{name}' is not a column of the data; its columns are {', '.join(dataset.column_names)}"
        )
    return name


def with_row_columns(spec: RunSpec, dataset: Dataset, split: str) -> Dataset:
    """The split's columns the task reads by name (its `row_columns`: preference pairs' prompt, chosen, rejected),
    those alone, or one sentence naming the ones it lacks."""
    needed = TASKS[spec.task].row_columns
    missing = [name for name in needed if name not in dataset.column_names]
    if missing:
        raise TrainError(
            f"the {split} split has no {', '.join(missing)} column(s) (it has {', '.join(dataset.column_names)}); "
            f"{spec.task} data needs {', '.join(needed)}"
        )
    return dataset.select_columns(list(needed))


def map_workers(spec: RunSpec, rows: int) -> int | None:
    """`num_proc` for tokenizing `rows` examples: the instance's vCPUs (only the node's first process maps;
    the others read its cache, see program.prepared_once_per_node), never more than this machine has (a
    rehearsal here of a 96-vCPU run), nor workers with under ROWS_PER_MAP_WORKER rows each. None: in-process."""
    try:
        vcpus = catalog_instance(str(spec.hardware.instance_type)).vcpus
    except CatalogError:
        vcpus = os.cpu_count() or 1
    workers = min(vcpus, os.cpu_count() or 1, rows // ROWS_PER_MAP_WORKER)
    return workers if workers > 1 else None
