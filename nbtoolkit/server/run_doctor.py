"""The run doctor over REST: a running job's health, its ranks' stacks, a checkpoint now, a fork. What the
panel's detail view calls; each refusal (a job that cannot save on request, no checkpoint to fork from, a
bad FIELD=VALUE) is the one sentence the CLI prints, answered as a 400."""

from __future__ import annotations

from nbtoolkit.api import Job
from nbtoolkit.backends import LaunchError
from nbtoolkit.lineage.fork import fork_settings
from nbtoolkit.runner.checkpoint_request import checkpoint_now
from nbtoolkit.runner.health import DoctorError, job_health
from nbtoolkit.runner.stacks import take_stacks
from nbtoolkit.runner.store import JOB_ID, JobRecord, JobStore
from nbtoolkit.server.models import CheckpointReply, ForkReply, JobHealth, StacksReply
from nbtoolkit.server.service import InvalidRequest
from nbtoolkit.spec import SpecError


class DoctorService:
    def __init__(self, store: JobStore) -> None:
        self.store = store

    def _record(self, job_id: str) -> JobRecord:
        if not JOB_ID.match(job_id):
            raise InvalidRequest(f"'{job_id[:40]}' is not a job id; a job id is 8 hex digits, e.g. 3f9a0c1d")
        return self.store.get(job_id)

    def health(self, job_id: str) -> JobHealth:
        return JobHealth.model_validate(job_health(self.store, self._record(job_id)).to_dict())

    def stacks(self, job_id: str) -> StacksReply:
        try:
            report = take_stacks(self.store, self._record(job_id))
        except DoctorError as exc:
            raise InvalidRequest(str(exc)) from None
        return StacksReply(summary=report.summary(), text=report.text(), path=str(report.path))

    def checkpoint(self, job_id: str) -> CheckpointReply:
        record = self._record(job_id)
        try:
            checkpoint_now(self.store, record, wait=False)
        except DoctorError as exc:
            raise InvalidRequest(str(exc)) from None
        return CheckpointReply(message=f"job {record.id} saves a checkpoint at its next steps and carries on")

    def fork(self, job_id: str, checkpoint: str | None, settings: list[str]) -> ForkReply:

        record = self._record(job_id)
        try:
            child = Job(record.id, self.store).fork(checkpoint or None, **fork_settings(settings))
        except (LaunchError, SpecError) as exc:
            raise InvalidRequest(str(exc)) from None
        child_record = child.record
        return ForkReply(id=child.id, name=child_record.name, message=f"job {child.id} forked from job {record.id}")
