"""Rows of a local train file that the task's trainer leaves out by their length (its `rows_left_out` fact: TRL's
RewardTrainer drops a pair longer than dataset.max_length, it does not cut it), counted before launch on the run's
own tokenizer, so `plan` says how many the job will drop rather than the job's log alone, and a file where every row
goes is refused before anything starts."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from nbtoolkit.tasks import TASKS, hook

#: rows of the train file tokenized at most (the bundled tokenizer tokenizes about 2,000 short pairs a second here)
LENGTH_ROWS = 1000


@dataclass(frozen=True)
class LeftOutRows:
    where: str  # the file, as the spec names it
    rows: int  # in the file
    checked: int  # tokenized: the first LENGTH_ROWS
    lost: int  # of those checked
    longest: int  # the longest row left out, in tokens

    @property
    def every_row_lost(self) -> bool:
        return self.lost == self.checked == self.rows

    def sentence(self, spec) -> str:
        rows = f"all {self.rows}" if self.every_row_lost else f"{self.lost} of the {self.checked}"
        checked = "" if self.checked == self.rows else f" first (of {self.rows})"
        nothing = ", so nothing would train" if self.every_row_lost else ""
        return (
            f"{rows}{checked} rows of {self.where} are longer than dataset.max_length {spec.dataset.max_length} "
            f"tokens (the longest runs {self.longest}), and task {spec.task}'s trainer leaves such rows out rather "
            f"than cutting them{nothing}; raise dataset.max_length to {self.longest} to keep them"
        )


def left_out_rows(spec, tokenizer) -> LeftOutRows | None:
    """The train file's rows the trainer leaves out by length; None when none is, or nothing here to count (the task
    leaves none out, the file is not on this machine's disk, or is parquet)."""
    task = TASKS[spec.task]
    files = spec.dataset.files or {}
    split = spec.dataset.train_split
    if not task.rows_left_out or split not in files or spec.hardware.target != "local":
        return None
    path = Path(files[split]).expanduser()
    if path.suffix.lower() == ".parquet" or not path.is_file():
        return None
    from nbtoolkit.inputs.data_files import rows

    length_if_left_out = hook(task.rows_left_out)
    where = f"dataset.files.{split} ({files[split]})"
    lost, total, checked = [], 0, 0
    for number, row in rows(path, where):
        total += 1
        if number <= LENGTH_ROWS:
            checked += 1
            length = length_if_left_out(spec, tokenizer, row)
            if length is not None:
                lost.append(length)
    return LeftOutRows(where, total, checked, len(lost), max(lost)) if lost else None
