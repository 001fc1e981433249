"""The program a Slurm job's supervisor runs: submit the batch script, follow the Slurm job, cancel it on stop.

    python -m nbtoolkit.backends.slurm.follow --script sbatch.sh

It submits with `sbatch --parsable` from the job folder, records the Slurm job id there
(`slurm_job_id`, and in the job's info), prints the job's output file as it grows (the supervisor
appends it to output.log), reports state changes from `scontrol`, and exits with what the job
became: 0 for COMPLETED, 1 with one `[nbtoolkit] error:` sentence for a failure. On SIGTERM (a
stop) it runs `scancel` and waits until Slurm says the job has ended on every node. A job cancelled
outside nbtoolkit asks the supervisor to stop the job, so that it is recorded as stopped.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

from nbtoolkit.backends.follower import command_line, fail, speaker, stop_on_signals
from nbtoolkit.backends.slurm.sbatch import output_file
from nbtoolkit.runner.tree import JOB_ID_ENV

say = speaker("slurm")
JOB_ID_FILE = "slurm_job_id"
SUCCEEDED = "COMPLETED"
CANCELLED = "CANCELLED"
#: final states that are failures -> what happened, for the job's message
FAILURES = {
    "FAILED": "a task exited with an error",
    "TIMEOUT": "it ran past its time limit (slurm.time_limit)",
    "NODE_FAIL": "a node of it failed",
    "OUT_OF_MEMORY": "a node ran out of memory",
    "BOOT_FAIL": "a node could not boot",
    "DEADLINE": "it reached its deadline",
    "PREEMPTED": "it was preempted and not requeued (slurm.requeue is off or the partition forbids it)",
}
FINAL = (SUCCEEDED, CANCELLED, *FAILURES)
#: how long the follower keeps asking a controller that does not answer before it gives up following the job
LOST_CONTACT_S = 900.0
#: how long a job cancelled outside nbtoolkit waits for the supervisor to act on its stop request
STOP_REQUEST_WAIT_S = 30.0


class SubmitError(RuntimeError):
    """sbatch refused the job; the message is its own."""


def slurm(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(list(argv), capture_output=True, text=True, stdin=subprocess.DEVNULL)


def submit(script: Path) -> str:
    result = slurm("sbatch", "--parsable", str(script))
    if result.returncode != 0:
        detail = (result.stderr.strip().splitlines() or [f"exit code {result.returncode}"])[-1]
        raise SubmitError(f"sbatch did not submit {script.name}: {detail}")
    return result.stdout.strip().split(";")[0]


class SlurmUnreachable(RuntimeError):
    """scontrol got no answer about the job (the controller is down or busy); the job itself may run on."""


def job_fields(job_id: str) -> dict[str, str] | None:
    """`scontrol show job` as fields (JobState, Reason, ExitCode ...); None once Slurm has forgotten the job."""
    result = slurm("scontrol", "show", "job", "-o", job_id)
    if result.returncode == 0 and "JobState=" in result.stdout:
        return dict(item.split("=", 1) for item in result.stdout.split() if "=" in item)
    if "Invalid job id" in result.stderr:
        return None
    raise SlurmUnreachable(result.stderr.strip() or f"scontrol exited with code {result.returncode}")


def accounted_state(job_id: str) -> str | None:
    """The job's final state from accounting (`sacct`), when scontrol no longer knows it; None without accounting."""
    result = slurm("sacct", "-n", "-P", "-X", "-j", job_id, "-o", "State")
    lines = result.stdout.split() if result.returncode == 0 else []
    return lines[0] if lines else None


class OutputTail:
    """Prints the whole lines Slurm appends to the job's output file (it appears once the job starts): a line
    cut off mid-write waits for its end, so the follower's own lines never split one."""

    def __init__(self, path: Path) -> None:
        self.path, self.offset = path, 0

    def pump(self, final: bool = False) -> None:
        try:
            with open(self.path, "rb") as handle:
                handle.seek(self.offset)
                chunk = handle.read()
        except FileNotFoundError:
            return
        if not final:
            chunk = chunk[: chunk.rfind(b"\n") + 1]
        if chunk:
            self.offset += len(chunk)
            sys.stdout.buffer.write(chunk if chunk.endswith(b"\n") else chunk + b"\n")
            sys.stdout.buffer.flush()


class Follower:
    def __init__(self, job_id: str, *, stop_requested: threading.Event, poll_s: float) -> None:
        self.job_id, self.stop_requested, self.poll_s = job_id, stop_requested, poll_s
        self.tail = OutputTail(Path(output_file(job_id)))
        self.cancel_sent = False
        self.state: str | None = None

    def run(self) -> int:
        unanswered_since = None
        while True:
            try:
                fields = job_fields(self.job_id)
                unanswered_since = None
            except SlurmUnreachable as exc:  # slurmctld restarting or overloaded: ask again a while
                unanswered_since = unanswered_since or time.monotonic()
                if time.monotonic() - unanswered_since > LOST_CONTACT_S:
                    return fail(
                        f"Slurm did not answer about job {self.job_id} for {LOST_CONTACT_S:.0f} s ({exc}); "
                        f"it may still be running: `scancel {self.job_id}` ends it"
                    )
                say(f"Slurm did not answer, asking again: {exc}")
                self.stop_requested.wait(self.poll_s)
                continue
            state = fields["JobState"] if fields else accounted_state(self.job_id)
            self.tail.pump()
            if state != self.state:
                self._report(state, fields)
            if state in FINAL or state is None:
                return self._finish(state, fields)
            if self.stop_requested.is_set() and not self.cancel_sent:
                self._cancel()
            if self.cancel_sent:
                time.sleep(self.poll_s)
            else:
                self.stop_requested.wait(self.poll_s)

    def _report(self, state: str | None, fields: dict[str, str] | None) -> None:
        self.state = state
        reason = fields.get("Reason", "None") if fields else "None"
        say(f"job {self.job_id} {state or 'no longer known to Slurm'}" + (f" ({reason})" if reason != "None" else ""))
        record_info(slurm_state=state)

    def _cancel(self) -> None:
        say(f"stopping: scancel {self.job_id}; waiting until Slurm reports the job ended")
        result = slurm("scancel", self.job_id)
        if result.returncode != 0:
            say(f"scancel {self.job_id} failed, asking again: {result.stderr.strip()}")
            return
        self.cancel_sent = True

    def _finish(self, state: str | None, fields: dict[str, str] | None) -> int:
        self.tail.pump(final=True)
        exit_code = f", exit code {fields['ExitCode']}" if fields and "ExitCode" in fields else ""
        if state == SUCCEEDED or (state in (CANCELLED, None) and self.cancel_sent):
            return 0
        if state == CANCELLED:
            return self._cancelled_elsewhere()
        if state is None:
            return fail(
                f"Slurm job {self.job_id} is no longer known to Slurm (scontrol) and there is no accounting "
                "(sacct) to say how it ended; see its output above"
            )
        ended = f"Slurm job {self.job_id} ended {state}: {FAILURES[state]}{exit_code}"
        if state == "FAILED":  # a task's own error, in the output above, says more: the job's message is that
            say(ended)
            return 1
        return fail(ended)

    def _cancelled_elsewhere(self) -> int:
        """scancel from outside: ask the supervisor to stop the job (recorded as stopped), then wait for it."""
        message = f"Slurm job {self.job_id} was cancelled outside nbtoolkit (scancel)"
        say(message)
        if request_stop():
            self.stop_requested.wait(STOP_REQUEST_WAIT_S)
            if self.stop_requested.is_set():
                return 0
        return fail(message)


def _store():
    from nbtoolkit.runner.store import JobStore

    return JobStore()


def record_info(**facts: object) -> None:
    """Facts for the job's record when run as a job's stage; a busy store only loses this update."""
    job_id = os.environ.get(JOB_ID_ENV)
    if not job_id:
        return
    try:
        _store().merge_info(job_id, facts)
    except sqlite3.DatabaseError as exc:
        say(f"the job store did not answer ({exc}); the job's record misses this update")


def request_stop() -> bool:
    job_id = os.environ.get(JOB_ID_ENV)
    try:
        return bool(job_id) and _store().request_stop(job_id)
    except sqlite3.DatabaseError:
        return False


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = command_line(__spec__.name, __doc__, poll_env="NBTOOLKIT_SLURM_POLL_S", poll_s=2)
    parser.add_argument("--script", type=Path, required=True, help="the batch script to submit (sbatch.sh)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    stop = stop_on_signals()
    try:
        job_id = submit(args.script)
    except (SubmitError, OSError) as exc:
        return fail(str(exc), code=2)
    Path(JOB_ID_FILE).write_text(job_id + "\n")
    say(f"submitted {args.script.name} as Slurm job {job_id}; its output: {output_file(job_id)}")
    record_info(slurm_job_id=job_id)
    return Follower(job_id, stop_requested=stop, poll_s=args.poll).run()


if __name__ == "__main__":
    sys.exit(main())
