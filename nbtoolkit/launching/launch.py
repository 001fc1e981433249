"""The Launch contract: what a backend renders from a spec and the job layer runs. Pure data: argv lists, env additions, files.

The job layer runs a Launch without knowing which engine it is; a user can run the same
thing by hand with the `run.sh` it renders.
"""

from __future__ import annotations

import json
import shlex
import socket
from dataclasses import asdict, dataclass, field
from typing import Any

from nbtoolkit.launching.credentials import shell_args
from nbtoolkit.launching.rendering import comment

#: the job's folder, in every stage's environment; in argv the supervisor (and run.sh's shell) expands it, so a
#: script that runs in the user's own directory still finds the job's files (`--deepspeed $NBTOOLKIT_JOB_DIR/...`)
JOB_DIR_ENV = "NBTOOLKIT_JOB_DIR"
JOB_DIR = f"${JOB_DIR_ENV}"


def free_port(host: str = "") -> int:
    """A TCP port free on this machine now, for a rendezvous chosen at render time."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def job_path(name: str, in_job_dir: bool) -> str:
    """A job file as argv names it: relative when the stage runs in the job folder, else under $NBTOOLKIT_JOB_DIR."""
    return name if in_job_dir else f"{JOB_DIR}/{name}"


def expand_job_dir(item: str, job_dir: str) -> str:
    return item.replace(JOB_DIR, job_dir)


def _shell_word(item: str) -> str:
    """An argv item for run.sh: quoted, with $NBTOOLKIT_JOB_DIR left for the shell to expand."""
    return f'"{JOB_DIR}"'.join(shlex.quote(part) if part else "" for part in item.split(JOB_DIR))


@dataclass(frozen=True)
class Stage:
    """One program the job runs, in order (e.g. precompile -> train -> predict).

    `metrics_from_log`: the program writes no metrics.jsonl itself (a user script, a remote
    job's log stream), so the supervisor parses its output into metrics.
    `stop_grace_s`: how long a stop waits after SIGTERM before SIGKILL, when the program needs
    longer than the supervisor's default to wind down (a remote job waits for its service).
    """

    name: str
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    metrics_from_log: bool = False
    stop_grace_s: float | None = None


@dataclass(frozen=True)
class Launch:
    """Everything needed to start a run, relative to its working directory (the job dir)."""

    backend: str
    stages: list[Stage]
    env: dict[str, str] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    #: several nodes: the argv items that carry this node's rank -> their form in run.sh, which takes
    #: the node rank as its first argument (the job runs the concrete items; run.sh serves every node)
    per_node: dict[str, str] = field(default_factory=dict)
    nodes: int = 1
    #: where the stages run: the directory a user's script was launched from (so its relative paths mean
    #: what they mean there); None: the job folder (nbtoolkit's own program)
    workdir: str | None = None

    @property
    def command(self) -> str:
        """The main stage's command, for display only."""
        return shlex.join(self.main_stage.argv)

    @property
    def main_stage(self) -> Stage:
        return next((stage for stage in self.stages if stage.name == "train"), self.stages[-1])

    def run_sh(self) -> str:
        """A script that reproduces the launch outside Jupyter, from the directory it sits in."""
        lines = [
            "#!/usr/bin/env bash",
            f"# nbtoolkit launch ({self.backend}); run from anywhere:",
            "set -euo pipefail",
            'cd "$(dirname "$0")"',
        ]
        lines += [comment(note) for note in self.notes]
        if self.per_node:
            usage = f"usage: run.sh NODE_RANK (0 to {self.nodes - 1}; 0 on the master node)"
            lines.append(f'NODE_RANK="${{1:?{usage}}}"')
        lines += [f"export {key}={shlex.quote(value)}" for key, value in sorted(self.env.items())]
        if self.workdir is not None:  # the job's files stay here, the script runs where it was launched from
            lines += [f'export {JOB_DIR_ENV}="$PWD"', f"cd {shlex.quote(self.workdir)}"]
        for stage in self.stages:
            lines += ["", comment(f"stage: {stage.name}")]
            prefix = " ".join(f"{key}={shlex.quote(value)}" for key, value in sorted(stage.env.items()))
            command = " ".join(
                self.per_node.get(item) or (_shell_word(item) if JOB_DIR in item else word)
                for item, word in zip(stage.argv, shell_args(stage.argv), strict=False)
            )
            lines.append(f"{prefix + ' ' if prefix else ''}{command}")
        return "\n".join(lines) + "\n"

    def to_json(self) -> str:
        data = asdict(self)
        if data["workdir"] is None:  # nbtoolkit's own program: launch.json as before there was a workdir
            del data["workdir"]
        return json.dumps(data, indent=2)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Launch:
        stages = [Stage(**stage) for stage in data["stages"]]
        return cls(**{**data, "stages": stages})
