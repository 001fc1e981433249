"""`nbtoolkit.log(step=..., **values)`: a custom training loop's one line to report metrics to its job.

Light (no torch): under a job it appends one record to the job's metrics.jsonl (rank 0 only), in the
shape nbtoolkit's own program writes; outside a job it warns once and does nothing, so the script
still runs anywhere. Autolog (nbtoolkit.train.autolog) writes through the same path. Called on every
rank, it also writes that rank's heartbeat (nbtoolkit.ranks.heartbeat), so the job's health sees each rank.
"""

from __future__ import annotations

import json
import math
import os
import time
import warnings
from numbers import Real
from pathlib import Path

from nbtoolkit.launching.launch import JOB_DIR_ENV
from nbtoolkit.metrics.parse import classify
from nbtoolkit.metrics.series import METRICS_FILE, STRUCTURED_MARKER
from nbtoolkit.ranks.heartbeat import Heartbeat

_warned_outside_a_job = False
_heartbeat: Heartbeat | None = None


def job_metrics_file() -> Path | None:
    """The running job's metrics.jsonl (the launch sets the job folder in the environment), None outside a job.

    Marks the job as writing its own records, so its log is no longer parsed (no step recorded twice).
    """
    job_dir = os.environ.get(JOB_DIR_ENV)
    if not job_dir:
        return None
    (Path(job_dir) / STRUCTURED_MARKER).touch()
    return Path(job_dir) / METRICS_FILE


def is_rank_zero() -> bool:
    return os.environ.get("RANK", "0") == "0"


def log(step: int, **values: float) -> None:
    """Record `values` (loss=..., learning_rate=..., eval_accuracy=...) at training step `step`.

    `eval_*` names make an eval record, `train_runtime` without `loss` a summary, anything else a train record.
    """
    global _warned_outside_a_job, _heartbeat
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise ValueError(f"nbtoolkit.log: step must be a whole number >= 0, got {step!r}")
    job_dir = os.environ.get(JOB_DIR_ENV)
    if job_dir and is_rank_zero():
        job_metrics_file()  # first: the supervisor stops parsing the log for records before it reads more of it
    if job_dir:
        if _heartbeat is None or _heartbeat.path.parents[1] != Path(job_dir):
            _heartbeat = Heartbeat(job_dir)
        _heartbeat.beat(step)
    if not is_rank_zero():
        return
    odd = sorted(key for key, value in values.items() if isinstance(value, bool) or not isinstance(value, Real))
    if odd:
        raise ValueError(f"nbtoolkit.log: {', '.join(odd)} must be numbers (e.g. loss=loss.item())")
    path = job_metrics_file()
    if path is None:
        if not _warned_outside_a_job:
            warnings.warn(
                "nbtoolkit.log records nothing here: this script is not running as an nbtoolkit job", stacklevel=2
            )
            _warned_outside_a_job = True
        return
    numbers = {key: float(value) for key, value in values.items()}
    record = {
        "time": time.time(),
        "step": step,
        "kind": classify(numbers) or "train",
        **{key: value if math.isfinite(value) else None for key, value in numbers.items()},
    }
    with open(path, "a") as handle:
        handle.write(json.dumps(record) + "\n")
