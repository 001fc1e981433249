"""The measured pace of past jobs of the same setup, which the planner takes instead of its assumed pace.

A job keeps its setup in its record at launch as a short key (model, task, hardware, parallelism,
precision, batch and lengths: what sets samples/s, not names, seeds or prices); a plan looks up the
newest succeeded jobs with the same key and uses the median of their steady samples/s.
"""

from __future__ import annotations

import hashlib
import json
import statistics
from dataclasses import dataclass

from nbtoolkit.metrics.series import read_metrics
from nbtoolkit.metrics.throughput import steady_state
from nbtoolkit.runner.store import JobStore
from nbtoolkit.spec import RunSpec

#: the key of the setup in a job record's info
INFO_KEY = "setup_key"
#: hardware fields that say where a run is, not what it runs on
_PLACE = ("node_rank", "master_addr", "master_port", "hourly_price_usd")
#: how many of the newest matching jobs the median is taken over
NEWEST = 5
#: how many succeeded jobs are looked through for a match
LOOKED_AT = 200


@dataclass(frozen=True)
class PastPace:
    samples_per_second: float
    jobs: tuple[str, ...]

    def describe(self) -> str:
        count = len(self.jobs)
        return f"{count} past job{'s' if count > 1 else ''} of this setup ({', '.join(self.jobs)})"


def setup_key(spec: RunSpec) -> str:
    """A short hash of the fields that set a run's pace."""
    data = spec.model_dump(mode="json")
    train, dataset = data["train"], data["dataset"]
    pace_fields = {
        "model": data["model"],
        "task": data["task"],
        "script": data["script"],
        "adapter": data["adapter"],
        "hardware": {key: value for key, value in data["hardware"].items() if key not in _PLACE},
        "parallelism": data["parallelism"],
        "precision": data["precision"],
        "compile": data["compile"],
        "launcher": data["launcher"],
        "train": {key: train[key] for key in ("batch_size", "grad_accum", "gradient_checkpointing")},
        "dataset": {key: dataset[key] for key in ("max_length", "max_target_length", "pad_to_max_length")},
    }
    return hashlib.sha256(json.dumps(pace_fields, sort_keys=True).encode()).hexdigest()[:16]


def past_pace(spec: RunSpec, store: JobStore) -> PastPace | None:
    """The median steady samples/s of the newest succeeded jobs of this setup, or None when there is none."""
    key = setup_key(spec)
    found: list[tuple[str, float]] = []
    for record in store.list(statuses=["succeeded"], limit=LOOKED_AT):
        if record.info.get(INFO_KEY) != key:
            continue
        pace = steady_state(read_metrics(store.job_dir(record.id))).samples_per_second
        if pace:
            found.append((record.id, pace))
        if len(found) == NEWEST:
            break
    if not found:
        return None
    return PastPace(statistics.median(pace for _, pace in found), tuple(job for job, _ in found))
