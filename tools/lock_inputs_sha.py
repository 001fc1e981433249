"""The sha256 of what requirements.lock is resolved from (`make lock` records it, `make lock-check` compares).

Of pyproject.toml only the [project] and [build-system] tables count: a lint rule or a pytest option in its
[tool.*] tables changes no package, so it must not make the lock look stale; nor do the commands and entry points
[project] registers (a task or backend added to nbtoolkit's own entry points names no package). constraints.txt
and the side environments' inputs (SkyPilot's, the floor's, llama.cpp's requirements and the image tables) count
whole: `make lock` writes their locks too, and lock-check catches a change to any of them.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parent.parent
INPUTS = (
    "pyproject.toml",
    "constraints.txt",
    "tools/skypilot-requirements.in",
    "tools/floor-requirements.in",
    "tools/llama-requirements.in",
)
IMAGE_TABLES = "tests/facts/images"
#: the keys of [project] that name no package
REGISTERED = ("scripts", "entry-points")


def input_files(root: Path = ROOT) -> list[str]:
    """Every input, as the Makefile's LOCK_INPUTS lists them (the image tables sorted)."""
    return [*INPUTS, *sorted(str(path.relative_to(root)) for path in (root / IMAGE_TABLES).glob("*.json"))]


def inputs_sha(root: Path = ROOT) -> str:
    pyproject = tomllib.loads((root / INPUTS[0]).read_text())
    project = {key: value for key, value in pyproject.get("project", {}).items() if key not in REGISTERED}
    packages = {"project": project, "build-system": pyproject.get("build-system")}
    text = json.dumps(packages, sort_keys=True) + "".join((root / name).read_text() for name in input_files(root)[1:])
    return hashlib.sha256(text.encode()).hexdigest()


if __name__ == "__main__":
    sys.exit(print(inputs_sha()))
