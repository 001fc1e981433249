"""What every remote engine's follower shares: its command line, how it is asked to stop, how it speaks and fails.

A follower is the program a job's supervisor runs as the stage of a remote engine's job (SageMaker,
Slurm, SkyPilot): it submits, streams the remote log to its stdout (the job's log), and cancels the
remote job when the supervisor's SIGTERM (`nbtoolkit stop`) comes.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from collections.abc import Callable

from nbtoolkit.launching.runtime import ERROR_PREFIX


def command_line(
    module: str, doc: str | None, *, poll_env: str | None = None, poll_s: float = 5.0
) -> argparse.ArgumentParser:
    """The follower's parser; with `poll_env`, a `--poll` option (seconds between status checks) whose default
    that environment variable can change (tests poll fast)."""
    parser = argparse.ArgumentParser(
        prog=f"python -m {module}", description=doc, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    if poll_env is not None:
        parser.add_argument(
            "--poll", type=float, default=float(os.environ.get(poll_env, poll_s)), help="seconds between status checks"
        )
    return parser


def stop_on_signals() -> threading.Event:
    """Set by SIGTERM (how the supervisor ends a stage) and SIGINT: the follower then cancels the remote job."""
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    return stop


def speaker(engine: str) -> Callable[[str], None]:
    """A function that writes the follower's own lines into the job's log, marked with the engine's name."""
    prefix = f"[nbtoolkit] {engine}:"

    def say(text: str) -> None:
        print(f"{prefix} {text}", flush=True)

    return say


def fail(message: str, code: int = 1) -> int:
    """The sentence the supervisor takes as the job's message (the last one printed), and the exit code to end with:
    1 when the remote job failed, 2 when the follower could not follow it."""
    print(f"{ERROR_PREFIX} {message}", file=sys.stderr, flush=True)
    return code
