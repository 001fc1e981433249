"""The program a SkyPilot job's supervisor runs: launch the managed job, stream its log, cancel it on a stop.

    python -m nbtoolkit.backends.skypilot.follow --task skypilot/task.yaml
    python -m nbtoolkit.backends.skypilot.follow --attach JOB_ID

It launches the task with SkyPilot's Python API (`sky.jobs.launch`), prints the managed job's log
as it arrives (the supervisor appends it to output.log and parses metrics from it), and exits with
the job's outcome: 0 when it succeeded, or when it was cancelled because the job was stopped
(SIGTERM or Ctrl-C sends `sky.jobs.cancel`). Run by hand (run.sh), it does the same without a job record.
"""

from __future__ import annotations

import io
import os
import re
import sqlite3
import sys
import threading
from pathlib import Path

from nbtoolkit.backends.follower import command_line, fail, speaker, stop_on_signals
from nbtoolkit.metrics.parse import RANK_PREFIX
from nbtoolkit.runner.tree import JOB_ID_ENV

say = speaker("skypilot")
#: SkyPilot's exit codes of a managed job's log stream (sky.exceptions.JobExitCode)
SUCCEEDED, CANCELLED = 0, 103
EXIT_CODES = {100: "failed", 101: "did not finish", 102: "was not found", CANCELLED: "was cancelled"}
#: the prefix SkyPilot gives each node's lines on several nodes: `(head, rank=0, pid=7)`, `(worker1, rank=1, pid=9,
#: ip=10.0.0.2)`, possibly coloured
NODE_PREFIX = re.compile(
    r"^(?:\x1b\[[0-9;]*m)*\((?:head|worker\d+), rank=(\d+), pid=\d+(?:, ip=[^)]*)?\)"
    r"(?:\x1b\[[0-9;]*m)*\s?"
)


def node_line(line: str) -> str:
    """A log line as the metrics parser reads it, which keeps rank 0's metrics. A line with torchrun's global
    `[rankN]:` prefix loses SkyPilot's (torchrun's rendezvous may put global rank 0 on any node); an unprefixed
    line (DeepSpeed's launcher, whose rank 0 is on node 0) of another node than the head becomes `[nodeN]: ...`."""
    prefix = NODE_PREFIX.match(line)
    if prefix is None:
        return line
    node, text = prefix.group(1), line[prefix.end() :]
    return text if node == "0" or RANK_PREFIX.match(text) else f"[node{node}]: {text}"


class NodeLines(io.TextIOBase):
    """The stream SkyPilot writes the job's log to: whole lines, node prefixes rewritten, to stdout."""

    def __init__(self) -> None:
        self.partial = ""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        *lines, self.partial = (self.partial + text).split("\n")
        for line in lines:
            print(node_line(line), flush=True)
        return len(text)

    def finish(self) -> None:
        """The last line, when the log did not end with a newline."""
        if self.partial:
            print(node_line(self.partial), flush=True)
            self.partial = ""


def record(job_id: int) -> None:
    """Name the managed job in this job's record (when a supervisor runs the follower); a busy store only logs."""
    own = os.environ.get(JOB_ID_ENV)
    if not own:
        return
    from nbtoolkit.runner.store import JobStore

    try:
        store = JobStore()
        store.update(own, remote_name=f"sky-managed-{job_id}")
        store.set_info(own, "skypilot_job_id", job_id)
    except sqlite3.DatabaseError as exc:
        say(f"the job store did not answer ({exc}); the job's record does not name managed job {job_id}")


def launch(task_file: Path) -> int:
    """Launch the task as a managed job; its id. The task's null `secrets` get their values from this
    environment, as `sky jobs launch --secret NAME` gives them: they reach the nodes, not a file."""
    import sky
    import yaml

    config = yaml.safe_load(task_file.read_text())
    given = [
        (name, os.environ[name])
        for name, value in (config.get("secrets") or {}).items()
        if value is None and name in os.environ
    ]
    task = sky.Task.from_yaml_config(config, secrets_overrides=given or None)
    say(f"launching managed job {task.name} ({task.num_nodes} node(s))")
    job_ids, _ = sky.get(sky.jobs.launch(task, name=task.name))
    say(f"managed job {job_ids[0]} launched; sky jobs queue shows it, sky jobs logs {job_ids[0]} follows it too")
    return job_ids[0]


def follow(job_id: int, stop: threading.Event) -> int:
    """Stream the managed job's log until it ends, cancel it if asked, and map its end to this program's exit code."""
    import sky

    record(job_id)

    def cancel_on_stop() -> None:
        stop.wait()
        say(f"stopping: cancelling managed job {job_id}; waiting until SkyPilot reports it cancelled")
        sky.get(sky.jobs.cancel(job_ids=[job_id]))

    threading.Thread(target=cancel_on_stop, daemon=True).start()
    stream = NodeLines()
    code = sky.jobs.tail_logs(job_id=job_id, follow=True, output_stream=stream)
    stream.finish()
    if code == SUCCEEDED or (code == CANCELLED and stop.is_set()):
        say(f"managed job {job_id} {'succeeded' if code == SUCCEEDED else 'cancelled as asked'}")
        return 0
    return fail(
        f"SkyPilot managed job {job_id} {EXIT_CODES.get(code, f'ended with code {code}')}; "
        f"sky jobs logs --controller {job_id} says why"
    )


def main(argv: list[str] | None = None) -> int:
    parser = command_line(__spec__.name, __doc__)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--task", type=Path, help="skypilot/task.yaml: launch this task, then follow it")
    source.add_argument("--attach", type=int, metavar="JOB_ID", help="follow a managed job launched elsewhere")
    args = parser.parse_args(argv)
    stop = stop_on_signals()
    try:
        return follow(launch(args.task) if args.task else args.attach, stop)
    except Exception as exc:  # SkyPilot's errors (no capacity, no credentials, an invalid task): one sentence
        message = " ".join(str(exc).split()) or type(exc).__name__
        return fail(f"SkyPilot could not run the managed job: {message}", code=2)


if __name__ == "__main__":
    sys.exit(main())
