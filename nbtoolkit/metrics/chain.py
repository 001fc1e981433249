"""One metric series for a chain of resumed (or forked) jobs, so a chart shows a stopped run and its resumption as one line.

Each job of the chain contributes its records up to the checkpoint the next job resumed from
(the later job redid the steps after it); every record says which job wrote it.
"""

from __future__ import annotations

import json
from typing import Any

from nbtoolkit.lineage.checkpoints import checkpoint_step
from nbtoolkit.metrics.series import read_metrics
from nbtoolkit.runner.store import JobNotFound, JobRecord, JobStore

#: the info key of a forked job that names its parent (written by nbtoolkit.lineage.fork)
FORKED_FROM = "forked_from"


def parent_job(record: JobRecord) -> str | None:
    """The job this one continues: resumed from, or forked from (nbtoolkit.lineage.fork records it in the info)."""
    return record.resumed_from or record.info.get(FORKED_FROM)


def resume_chain(store: JobStore, job_id: str) -> list[JobRecord]:
    """The job and the jobs it was resumed or forked from, oldest first."""
    chain = [store.get(job_id)]
    while (parent := parent_job(chain[0])) and parent not in {record.id for record in chain}:
        try:
            chain.insert(0, store.get(parent))
        except JobNotFound:  # the older job was deleted: the chain starts here
            break
    return chain


def resumed_at_step(store: JobStore, record: JobRecord) -> int | None:
    """The step of the checkpoint a resumed job started from (its spec's `resume`)."""
    try:
        resume = json.loads((store.job_dir(record.id) / "spec.json").read_text()).get("resume")
    except (OSError, ValueError):
        return None
    return checkpoint_step(resume) if resume else None


def chain_records(store: JobStore, job_id: str) -> list[dict[str, Any]]:
    """The metric records of the whole resume chain ending at `job_id`, as one series tagged with `job`."""
    chain = resume_chain(store, job_id)
    series: list[dict[str, Any]] = []
    for index, record in enumerate(chain):
        records = read_metrics(store.job_dir(record.id))
        if index + 1 < len(chain):
            cut = resumed_at_step(store, chain[index + 1])
            records = [
                r for r in records if r.get("kind") != "summary" and (cut is None or (r.get("step") or 0) <= cut)
            ]
        series += [{**r, "job": record.id} for r in records]
    return series
