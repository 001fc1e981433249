"""Launch: what a backend renders from a spec. Pure data: argv lists, env additions, files.

The job layer runs a Launch without knowing which engine it is; a user can run the same
thing by hand with the `run.sh` it renders.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import asdict, dataclass, field
from typing import Any


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

    @property
    def command(self) -> str:
        """The main stage's command, for display only."""
        return shlex.join(self.main_stage.argv)

    @property
    def main_stage(self) -> Stage:
        return next((stage for stage in self.stages if stage.name == "train"), self.stages[-1])

    def run_sh(self) -> str:
        """A script that reproduces the launch outside Jupyter, from the directory it sits in."""
        lines = ["#!/usr/bin/env bash", f"# nbtoolkit launch ({self.backend}); run from anywhere:", "set -euo pipefail",
                 'cd "$(dirname "$0")"']
        lines += [f"# {note}" for note in self.notes]
        lines += [f"export {key}={shlex.quote(value)}" for key, value in sorted(self.env.items())]
        for stage in self.stages:
            lines.append(f"\n# stage: {stage.name}")
            prefix = " ".join(f"{key}={shlex.quote(value)}" for key, value in sorted(stage.env.items()))
            lines.append(f"{prefix + ' ' if prefix else ''}{shlex.join(stage.argv)}")
        return "\n".join(lines) + "\n"

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Launch:
        stages = [Stage(**stage) for stage in data["stages"]]
        return cls(**{**data, "stages": stages})
