"""A stand-in for the part of SkyPilot's client API (0.14.1) that nbtoolkit calls, for tests: a real
SkyPilot needs a cloud, and cannot share an environment with nbtoolkit's locked packages here.

The signatures are SkyPilot's (sky/client/sdk.py, sky/jobs/client/sdk.py; tests/skypilot/test_skypilot_contract.py
holds them to the real SkyPilot in .venv-skypilot). Each call is appended to $FAKE_SKY_DIR/calls.jsonl. Like SkyPilot's,
`jobs.launch` refuses a task whose workdir is not a folder relative to the current directory.
"""

from __future__ import annotations

import json
import os
from pathlib import Path


def _calls_file() -> Path:
    return Path(os.environ["FAKE_SKY_DIR"]) / "calls.jsonl"


def record_call(call: str, **values) -> None:
    with _calls_file().open("a") as calls:
        calls.write(json.dumps({"call": call, **values}) + "\n")


class Task:
    def __init__(self, config: dict, secrets: dict | None = None) -> None:
        self.config = config
        self.name = config.get("name")
        self.num_nodes = config.get("num_nodes", 1)
        self.secrets = secrets or {}  # the values given at launch (SkyPilot keeps them apart from the YAML too)

    @staticmethod
    def from_yaml_config(config, env_overrides=None, secrets_overrides=None) -> Task:
        return Task(config, dict(secrets_overrides or []))


from sky import jobs as jobs  # noqa: E402  (re-exported, as SkyPilot's package does)
from sky.client.sdk import get as get  # noqa: E402  (re-exported after Task, as SkyPilot's package does)
