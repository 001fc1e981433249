"""The supervisor's watcher: its own program, which ends what a dead supervisor left running.

Stages run in their own sessions (so a stop can end each one's process group), so when the
supervisor itself is killed (kill -9, the OOM killer) nothing would end its ranks: they would
keep the accelerators and keep writing. The watcher waits on a pipe that only the supervisor
holds open; end of file means the supervisor is gone, however it went. It then ends every
process tagged with the job (see `tree`) and, if the job was still active, records it lost.

It is started as its own program, not forked, so it has its own command line: a user's
`pkill -9 -f nbtoolkit.runner.supervisor` (the first thing tried on a stuck job) ends the
supervisor and leaves the watcher to end the ranks and record the job.

    python -m nbtoolkit.runner.watcher JOB_ID --pipe FD --grace SECONDS   (NBTOOLKIT_HOME names the store)
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import subprocess
import sys
import time

from nbtoolkit.runner.scrub import job_scrubber, scrub_job_files
from nbtoolkit.runner.store import JobStore
from nbtoolkit.runner.tree import WATCHER_MODULE, end_processes, tagged_processes

#: how long the watcher keeps trying to record the outcome when the store is busy
RECORD_TRIES, RECORD_PAUSE_S = 30, 1.0
MODULE = WATCHER_MODULE


def start_watcher(job_id: str, grace: float) -> tuple[int, int]:
    """Start the watcher; returns (its pid, the pipe end this process must keep open until it exits).

    In its own session (ending the supervisor's group does not end it), with the supervisor's
    environment (the store, the job's tag) and stderr (supervisor.log).
    """
    read_end, write_end = os.pipe()
    try:
        watcher = subprocess.Popen(
            [sys.executable, "-m", MODULE, job_id, "--pipe", str(read_end), "--grace", str(grace)],
            pass_fds=(read_end,),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            start_new_session=True,
        )
    finally:
        os.close(read_end)
    return watcher.pid, write_end  # not inheritable (PEP 446): no stage holds it open


def reap(store: JobStore, job_id: str, grace: float) -> list:
    """End the job's remaining processes; if the supervisor died with the job active, record it lost and scrub
    the files its ranks wrote (the supervisor did not live to)."""
    ended = end_processes(tagged_processes(job_id, store.home), grace)
    for _ in range(RECORD_TRIES):
        try:
            record = store.get(job_id)  # marks it lost if the supervisor died before recording an end
            if record.status == "lost":
                job_dir = store.job_dir(job_id)
                scrub_job_files(job_dir, job_scrubber(job_dir, dict(os.environ)), _say)
            if record.status == "lost" and ended:
                store.update(job_id, message=f"{record.message}; its {len(ended)} remaining processes were ended")
            return ended
        except sqlite3.OperationalError:
            time.sleep(RECORD_PAUSE_S)
    return ended


def _say(text: str) -> None:
    print(f"[nbtoolkit] watcher: {text}", file=sys.stderr, flush=True)  # supervisor.log


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=f"python -m {MODULE}", description=__doc__.splitlines()[0])
    parser.add_argument("job_id")
    parser.add_argument("--pipe", type=int, required=True, help="read end of the pipe the supervisor holds open")
    parser.add_argument("--grace", type=float, default=5.0, help="seconds between SIGTERM and SIGKILL")
    args = parser.parse_args(argv)
    try:
        while os.read(args.pipe, 1):  # the supervisor writes nothing: this returns b"" when it is gone
            pass
        reap(JobStore(), args.job_id, args.grace)
    except Exception as exc:
        print(f"[nbtoolkit] watcher of job {args.job_id}: {exc!r}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
