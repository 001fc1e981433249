"""The program a SageMaker job's supervisor runs: submit (or attach), follow, stop.

    python -m nbtoolkit.backends.sagemaker.follow --job sagemaker/job.json [--phase precompile]
    python -m nbtoolkit.backends.sagemaker.follow --attach NAME [--region REGION]

It prints the training job's CloudWatch log lines as they arrive (the supervisor appends them to
output.log and parses them into metrics.jsonl), keeps the job record's `info` current (status,
billable seconds, cost, spot savings), and on SIGTERM or Ctrl-C stops the training job and waits
until SageMaker reports it Stopped. Run by hand (run.sh), it does the same without a job record.
"""

from __future__ import annotations

import argparse
import os
import re
import sqlite3
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from nbtoolkit.backends.follower import command_line, fail, speaker, stop_on_signals
from nbtoolkit.backends.sagemaker.aws_errors import explain
from nbtoolkit.backends.sagemaker.job import TrainingJob
from nbtoolkit.hardware.catalog import hourly_price
from nbtoolkit.metrics.cost import cost_usd
from nbtoolkit.runner.tree import JOB_ID_ENV
from nbtoolkit.trained_model.artifacts import MODEL_URI_KEY

LOG_GROUP = "/aws/sagemaker/TrainingJobs"
say = speaker("sagemaker")
FINAL = ("Completed", "Failed", "Stopped")
#: spot capacity was taken back; SageMaker restarts the job when capacity returns
INTERRUPTED = ("Interrupted", "Restarting")
HOST = re.compile(r"/algo-(\d+)")
#: how long the follower keeps trying when AWS cannot be reached before it gives up on the job
LOST_CONTACT_S = 900.0


def transient(exc: BaseException) -> bool:
    """Worth retrying: no connection, throttling, a service-side error, credentials that a refresh renews."""
    from botocore.exceptions import ClientError, ConnectionError, NoCredentialsError

    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 500)
        return (
            status >= 500 or status == 429 or "Throttl" in error.get("Code", "") or "Expired" in error.get("Code", "")
        )
    return isinstance(exc, (ConnectionError, NoCredentialsError, OSError))


def console_url(region: str, name: str) -> str:
    return f"https://{region}.console.aws.amazon.com/sagemaker/home?region={region}#/jobs/{name}"


def not_resumable_message(name: str) -> str:
    return (
        f"spot capacity for training job {name} was interrupted and the job has no checkpoints to resume from, "
        "so SageMaker restarts it from step 0; save checkpoints to /opt/ml/checkpoints (nbtoolkit's program "
        "does with train.save_steps) to resume from the latest one instead"
    )


def cost_facts(described: dict[str, Any], instance_price: float | None, now: float) -> dict[str, Any]:
    """Billable time and cost from DescribeTrainingJob; an estimate from the start time while it runs."""
    count = described.get("ResourceConfig", {}).get("InstanceCount", 1)
    facts: dict[str, Any] = {
        "instance_hourly_price_usd": instance_price,
        "hourly_price_usd": instance_price * count if instance_price is not None else None,
    }
    billable, training = described.get("BillableTimeInSeconds"), described.get("TrainingTimeInSeconds")
    estimated = billable is None
    if estimated:
        started, ended = described.get("TrainingStartTime"), described.get("TrainingEndTime")
        end = ended.timestamp() if isinstance(ended, datetime) else now
        billable = max(0, int(end - started.timestamp())) if isinstance(started, datetime) else 0  # not yet training
    facts.update(billable_seconds=billable, training_seconds=training, cost_estimated=estimated)
    if instance_price is not None and billable is not None:
        facts["cost_usd"] = cost_usd(facts["hourly_price_usd"], billable)  # what every view shows
        if training and described.get("EnableManagedSpotTraining") and not estimated:
            facts["on_demand_cost_usd"] = cost_usd(facts["hourly_price_usd"], training)
            facts["spot_savings_pct"] = round(100 * (1 - billable / training), 1)
    return facts


@dataclass
class LogTail:
    """New CloudWatch lines of one training job, across its hosts' streams (and restarts after spot interruptions)."""

    logs: Any
    name: str
    tokens: dict[str, str] = field(default_factory=dict)

    def read_new(self) -> list[str]:
        """Lines not seen before; other hosts' lines carry an `[algoN]:` prefix (the parser keeps host 1's metrics)."""
        try:
            streams = self.logs.describe_log_streams(
                logGroupName=LOG_GROUP, logStreamNamePrefix=f"{self.name}/", orderBy="LogStreamName"
            )["logStreams"]
        except self.logs.exceptions.ResourceNotFoundException:
            return []  # no container has logged yet
        lines = []
        for stream in streams:
            stream_name = stream["logStreamName"]
            host = HOST.search(stream_name)
            prefix = f"[algo{host.group(1)}]: " if host and host.group(1) != "1" else ""
            while True:
                kwargs = {"nextToken": self.tokens[stream_name]} if stream_name in self.tokens else {}
                page = self.logs.get_log_events(
                    logGroupName=LOG_GROUP, logStreamName=stream_name, startFromHead=True, **kwargs
                )
                lines += [prefix + event["message"].rstrip("\n") for event in page["events"]]
                token = page.get("nextForwardToken")
                if not page["events"] or token is None or token == self.tokens.get(stream_name):
                    self.tokens[stream_name] = token or self.tokens.get(stream_name)
                    break
                self.tokens[stream_name] = token
        return lines


class LostContact(RuntimeError):
    """AWS could not be reached for too long; the training job itself may still be running."""


class StopFailed(RuntimeError):
    """SageMaker refused to stop the training job: it keeps running (and billing)."""


class Follower:
    """Follows one training job until it ends; `stop_requested` (set by a signal) stops it first."""

    def __init__(
        self,
        boto,
        name: str,
        *,
        stop_requested: threading.Event,
        phase: str = "train",
        instance_price: float | None = None,
        poll_s: float = 5.0,
    ) -> None:
        self.sagemaker, self.s3, self.name, self.phase = boto.client("sagemaker"), boto.client("s3"), name, phase
        self.region = boto.region_name
        self.tail = LogTail(boto.client("logs"), name)
        self.instance_price, self.poll_s, self.stop_requested = instance_price, poll_s, stop_requested
        self.stop_sent = False
        self.transitions_seen = 0
        self.warned_interruption = False
        self.record = JobRecordUpdater.from_environment()

    def run(self) -> int:
        say(f"following training job {self.name} ({console_url(self.region, self.name)})")
        failing_since = None
        while True:
            try:
                described = self._poll()
                failing_since = None
            except StopFailed:
                raise
            except Exception as exc:  # a laptop asleep, a network blip, throttling: retry a while
                failing_since = failing_since or time.monotonic()
                if not transient(exc) or time.monotonic() - failing_since > LOST_CONTACT_S:
                    raise LostContact(
                        f"{explain(exc, action='follow the training job')}; training job {self.name} "
                        f"may still be running: `nbtoolkit attach {self.name}` follows it again"
                    ) from exc
                say(f"cannot reach AWS, retrying: {explain(exc, action='follow the training job')}")
                time.sleep(self.poll_s)
                continue
            if described["TrainingJobStatus"] in FINAL:
                return self._finish(described)
            if self.stop_sent:
                time.sleep(self.poll_s)
            else:
                self.stop_requested.wait(self.poll_s)

    def _poll(self) -> dict[str, Any]:
        """One round: status, new log lines, and the stop request if one came."""
        described = self.sagemaker.describe_training_job(TrainingJobName=self.name)
        self._report(described)
        for line in self.tail.read_new():
            print(line, flush=True)
        if self.stop_requested.is_set() and not self.stop_sent and described["TrainingJobStatus"] not in FINAL:
            self._stop()
        return described

    def _stop(self) -> None:
        """Ask SageMaker to stop the job: a passing failure is asked again next poll, a refusal ends following."""
        say(f"stopping training job {self.name}; waiting until SageMaker reports it Stopped")
        action = f"stop training job {self.name}"
        try:
            self.sagemaker.stop_training_job(TrainingJobName=self.name)
        except Exception as exc:
            if transient(exc):
                say(f"could not stop it yet, asking again: {explain(exc, action=action)}")
                return
            raise StopFailed(
                f"{explain(exc, action=action, needs='sagemaker:StopTrainingJob')}; the training job "
                f"is still running (and billing): stop it in the console, "
                f"{console_url(self.region, self.name)}"
            ) from exc
        self.stop_sent = True

    def _report(self, described: dict[str, Any]) -> None:
        transitions = described.get("SecondaryStatusTransitions", [])
        for transition in transitions[self.transitions_seen :]:
            say(f"{transition['Status']}: {transition.get('StatusMessage', '')}".rstrip(": "))
            if (
                transition["Status"] in INTERRUPTED
                and not self.warned_interruption
                and not self._checkpointed(described)
            ):
                self.warned_interruption = True
                message = not_resumable_message(self.name)
                print(f"[nbtoolkit] warning: {message}", flush=True)
                self.record.update(message=message)
        self.transitions_seen = max(self.transitions_seen, len(transitions))
        facts = {
            "status": described["TrainingJobStatus"],
            "secondary_status": described.get("SecondaryStatus"),
            **cost_facts(described, self.instance_price, time.time()),
        }
        self.record.phase_facts(self.phase, facts)

    def _checkpointed(self, described: dict[str, Any]) -> bool:
        """Whether the job has saved a checkpoint to its CheckpointConfig S3 URI (what a restart resumes from)."""
        uri = described.get("CheckpointConfig", {}).get("S3Uri")
        if not uri:
            return False
        bucket, _, prefix = uri.removeprefix("s3://").partition("/")
        return self.s3.list_objects_v2(Bucket=bucket, Prefix=prefix, MaxKeys=1).get("KeyCount", 0) > 0

    def _finish(self, described: dict[str, Any]) -> int:
        status, reason = described["TrainingJobStatus"], described.get("FailureReason")
        facts = self.record.phase(self.phase)
        cost = f", cost ${facts['cost_usd']:.2f}" if facts.get("cost_usd") is not None else ""
        savings = f" (spot saved {facts['spot_savings_pct']:.0f}%)" if facts.get("spot_savings_pct") is not None else ""
        say(f"training job {self.name} {status}; billable {facts.get('billable_seconds')} s{cost}{savings}")
        model = described.get("ModelArtifacts", {}).get("S3ModelArtifacts")  # where SageMaker keeps it: job.model()
        if status == "Completed" and self.phase == "train" and model:
            self.record.phase_facts(self.phase, {MODEL_URI_KEY: model})
        if status == "Completed" or (status == "Stopped" and self.stop_sent):
            return 0
        detail = f": {reason}" if reason else (f" ({described.get('SecondaryStatus')})" if status == "Stopped" else "")
        return fail(f"SageMaker training job {self.name} {status.lower()}{detail}")


class JobRecordUpdater:
    """Writes the follower's facts into its job's record (when it runs as a job's stage).

    The record is a side channel: a busy store keeps the facts pending for the next poll and
    never interrupts following the training job.
    """

    def __init__(self, store, job_id: str | None) -> None:
        self.store, self.job_id = store, job_id
        self.phases: dict[str, dict[str, Any]] = {}
        self.pending: dict[str, Any] = {}
        self.latest: dict[str, Any] = {}  # the facts of the last phase reported (the row's top-level info)

    @classmethod
    def from_environment(cls) -> JobRecordUpdater:
        """The store is opened at the first write, where a busy one is only noted (opening writes too)."""
        return cls(None, os.environ.get(JOB_ID_ENV) or None)

    def phase(self, phase: str) -> dict[str, Any]:
        return self.phases.get(phase, {})

    def phase_facts(self, phase: str, facts: dict[str, Any]) -> None:
        """Record one SageMaker job's facts; the totals (billable seconds, cost) add up every phase."""
        self.phases[phase] = {**self.phases.get(phase, {}), **facts}
        self.latest = facts
        self._flush()

    def update(self, **values: Any) -> None:
        self.pending.update(values)
        self._flush()

    def _flush(self) -> None:
        if self.job_id is None:
            return
        try:
            if self.store is None:
                from nbtoolkit.runner.store import JobStore

                self.store = JobStore()
            if self.pending:
                self.store.update(self.job_id, **self.pending)
                self.pending = {}
            if self.phases:  # only the keys it owns: the supervisor writes others (budget) meanwhile
                phases = {**self.store.get(self.job_id).info.get("sagemaker_jobs", {}), **self.phases}
                totals = {
                    "billable_seconds": sum(item.get("billable_seconds") or 0 for item in phases.values()),
                    "cost_usd": _sum_or_none(item.get("cost_usd") for item in phases.values()),
                }
                self.store.merge_info(self.job_id, {**self.latest, **totals, "sagemaker_jobs": phases})
        except sqlite3.DatabaseError as exc:  # e.g. "database is locked" past the busy timeout, a disk I/O error
            say(f"the job store did not answer ({exc}); the job's record catches up at the next poll")


def _sum_or_none(values) -> float | None:
    known = [value for value in values if value is not None]
    return round(sum(known), 4) if known else None


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = command_line(__spec__.name, __doc__, poll_env="NBTOOLKIT_SAGEMAKER_POLL_S", poll_s=5)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--job", type=Path, help="sagemaker/job.json: submit this training job, then follow it")
    source.add_argument("--attach", metavar="NAME", help="follow an existing training job")
    parser.add_argument("--phase", choices=["train", "precompile"], default="train")
    parser.add_argument("--region", help="with --attach: the job's region (default: the configured one)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    stop = stop_on_signals()
    from nbtoolkit.backends.sagemaker.submit import SubmitError, boto_session, submit

    try:
        if args.job:
            job = TrainingJob.model_validate_json(args.job.read_text()).for_phase(args.phase)
            say(
                f"submitting {args.phase} job {job.base_job_name}-* on {job.instance_count} x {job.instance_type}"
                + (" (managed spot)" if job.spot else "")
            )
            name, region = submit(job, Path.cwd(), say)
            price = job.hourly_price_usd
        else:
            name, region, price = args.attach, args.region, None
        boto = boto_session(region)
        follower = Follower(boto, name, stop_requested=stop, phase=args.phase, poll_s=args.poll, instance_price=price)
        if price is None:
            described = follower.sagemaker.describe_training_job(TrainingJobName=name)
            follower.instance_price = hourly_price(described["ResourceConfig"]["InstanceType"])
        follower.record.update(remote_name=name)
        follower.record.phase_facts(
            args.phase, {"remote_name": name, "region": region, "console_url": console_url(boto.region_name, name)}
        )
        return follower.run()
    except (SubmitError, LostContact, StopFailed) as exc:
        message = str(exc)
    except Exception as exc:  # AWS calls while following: one sentence, not a traceback
        message = explain(exc, action="follow the training job")
    return fail(message, code=2)


if __name__ == "__main__":
    sys.exit(main())
