"""A backend from another distribution: registered by an entry point alone, it adds a target, a spec block
with its own rules, a render, and runs as a job like nbtoolkit's own; a broken one is named and left out."""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
from pathlib import Path

import pytest

from tests.conftest import PYTHON

DESCRIPTOR = '''
"""A cluster nbtoolkit does not know: its jobs run `echo` here."""
from pydantic import Field

from nbtoolkit.backends import Backend
from nbtoolkit.spec_parts.block import SpecBlock


class QueueSpec(SpecBlock):
    queue: str = Field("default", pattern=r"^[a-z]+$")


backend = Backend(name="queuey", implementation="queuey_nbtoolkit.render", target="queuey", block=QueueSpec)
'''

RENDER = """
import sys

from nbtoolkit.launching.launch import Launch, Stage


def validate(spec):
    if spec.queuey is None:
        return "queuey.queue is missing; a queuey target needs a queue, e.g. queuey: {queue: gpu}"
    return None


def render(spec):
    argv = [sys.executable, "-c", f"print('queued on {spec.queuey.queue}: {spec.display_name}')"]
    return Launch(backend="queuey", stages=[Stage(name="train", argv=argv)])
"""


def plugin(root: Path, name: str, entry: str, files: dict[str, str], group: str = "nbtoolkit.backends") -> None:
    """A distribution as pip would leave it: its package, and a dist-info that declares the entry point(s) (lines of
    `entry`) in `group`."""
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(textwrap.dedent(text))
    info = root / f"{name}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[{group}]\n{entry}\n")


def run(code: str, root: Path, home: Path) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]),
        "NBTOOLKIT_HOME": str(home),
    }
    return subprocess.run([PYTHON, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env, timeout=300)


@pytest.fixture
def queuey(tmp_path) -> Path:
    root = tmp_path / "site"
    plugin(
        root,
        "queuey_nbtoolkit",
        "queuey = queuey_nbtoolkit:backend",
        {"queuey_nbtoolkit/__init__.py": DESCRIPTOR, "queuey_nbtoolkit/render.py": RENDER},
    )
    return root


def test_a_backend_registered_only_by_its_entry_point_is_a_target_with_its_block_and_runs_a_job(queuey, home):
    done = run(
        """
        import json
        from nbtoolkit import backends
        from nbtoolkit.api import launch
        from nbtoolkit.notebook.spec_fields import choices
        from nbtoolkit.spec import SpecError, load_spec

        found = {"targets": backends.targets(), "form": list(choices("hardware.target"))}
        for bad in ({}, {"queuey": {"queue": "GPU!"}}, {"queuey": {"queue": "gpu", "nodes": 2}}):
            try:
                load_spec({"task": "causal-lm", "hardware": {"target": "queuey"}, **bad})
            except SpecError as exc:
                found.setdefault("refused", []).append(str(exc))
        spec = {"name": "plugged", "task": "causal-lm", "hardware": {"target": "queuey"}, "queuey": {"queue": "gpu"}}
        job = launch(spec)
        found.update(status=job.wait(timeout=120), backend=job.record.backend, log=job.logs(),
                     saved=load_spec(job.dir / "spec.json").queuey.queue)
        print(json.dumps(found))
    """,
        queuey,
        home,
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.splitlines()[-1])
    assert found["targets"] == found["form"] and "queuey" in found["targets"] and found["targets"][0] == "local"
    assert found["refused"][0] == "queuey.queue is missing; a queuey target needs a queue, e.g. queuey: {queue: gpu}"
    assert found["refused"][1].startswith("queuey.queue: 'GPU!' is not valid")
    assert found["refused"][2].startswith("queuey.nodes is not a known field; valid fields of queuey are queue")
    assert (found["status"], found["backend"], found["saved"]) == ("succeeded", "queuey", "gpu")
    assert "queued on gpu: plugged" in found["log"]


def test_a_plugin_that_fails_to_load_is_named_and_left_out(tmp_path, home):
    root = tmp_path / "site"
    plugin(
        root,
        "broken_nbtoolkit",
        "broken = broken_nbtoolkit:backend",
        {"broken_nbtoolkit/__init__.py": "raise ImportError('needs libfoo')\n"},
    )
    done = run(
        """
        import warnings
        warnings.simplefilter("always")
        from nbtoolkit.spec import load_spec
        print(load_spec({"task": "causal-lm"}).hardware.target)
    """,
        root,
        home,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "local"
    assert (
        "backend 'broken' (broken_nbtoolkit:backend) could not be loaded and is left out: needs libfoo" in done.stderr
    )
