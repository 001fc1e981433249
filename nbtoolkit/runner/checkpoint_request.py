"""Checkpoint now: ask a running job to save at its next step and carry on (see nbtoolkit.ranks.heartbeat for
how its ranks agree on the step). Only ranks that run nbtoolkit's Trainer callback can (our training
program, a Trainer script under autolog); their heartbeats say so, and any other job is refused in
one sentence.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

from nbtoolkit.lineage.checkpoints import is_complete
from nbtoolkit.ranks.heartbeat import checkpoint_request, read_heartbeats, request_checkpoint
from nbtoolkit.runner.health import DoctorError
from nbtoolkit.runner.store import JobRecord, JobStore

CHECKPOINT_WAIT_S = 300.0
POLL_S = 0.5


def checkpoint_now(
    store: JobStore, record: JobRecord, *, wait: bool = True, timeout: float = CHECKPOINT_WAIT_S
) -> Path | None:
    """Request the checkpoint; with `wait`, return its folder once complete (None without `wait`)."""
    if wait and not (isinstance(timeout, (int, float)) and math.isfinite(timeout) and timeout > 0):
        raise DoctorError(f"timeout {timeout} is not a number of seconds above 0 (default {CHECKPOINT_WAIT_S:.0f})")
    if not record.active:
        raise DoctorError(f"job {record.id} is {record.status}: only a running job can be asked for a checkpoint")
    job_dir = store.job_dir(record.id)
    beats = read_heartbeats(job_dir)
    if not beats:
        raise DoctorError(
            f"job {record.id} has not reported a training step yet; ask again once it trains (a job that never "
            "reports one, a remote engine or a script without a Trainer, cannot be asked)"
        )
    if not all(beat.get("can_checkpoint") for beat in beats):
        raise DoctorError(
            f"job {record.id} cannot save on request: its ranks run no nbtoolkit Trainer callback (a custom loop "
            "reporting with nbtoolkit.log saves on its own schedule)"
        )
    request_id = request_checkpoint(job_dir)
    if not wait:
        return None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        request = checkpoint_request(job_dir) or {}
        if request.get("id") != request_id:
            raise DoctorError(f"another checkpoint request for job {record.id} replaced this one")
        if request.get("saved") and is_complete(request["saved"]):
            return Path(request["saved"])
        if not store.get(record.id).active:
            raise DoctorError(
                f"job {record.id} ended before it reached the requested step {request.get('at_step', '?')}; "
                "its last checkpoint or final model is what it left"
            )
        time.sleep(POLL_S)
    raise DoctorError(
        f"job {record.id} saved no checkpoint within {timeout:.0f} s of the request; the request stands "
        f"(`nbtoolkit show {record.id}` tells whether it still steps)"
    )
