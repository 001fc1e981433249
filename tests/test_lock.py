"""requirements.lock: what `make` installs. It must name every package pyproject.toml asks for, at a
version the project's pins allow, each with hashes, and `make` must refuse a lock older than its inputs."""

from __future__ import annotations

import functools
import operator
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import tomllib
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from tools.lock_inputs_sha import input_files, inputs_sha

ROOT = Path(__file__).resolve().parent.parent
LOCK = ROOT / "requirements.lock"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
#: what the locks are made from (the main environment's, then the side environments': SkyPilot's, the floor's,
#: llama.cpp's and each image's table)
INPUTS = tuple(input_files())
STALE = f"requirements.lock is older than {' '.join(INPUTS)}: run `make lock`"


def locked() -> dict[str, tuple[Version, list[str]]]:
    """Each locked package's version and hashes, read as pip reads the file."""
    entries: dict[str, tuple[Version, list[str]]] = {}
    for block in re.split(r"\n(?=\S)", LOCK.read_text()):
        pinned = re.match(r"([A-Za-z0-9._-]+)==(\S+)", block)
        if pinned:
            entries[canonicalize_name(pinned[1])] = (Version(pinned[2]), re.findall(r"--hash=sha256:(\w{64})", block))
    return entries


def requirements() -> list[Requirement]:
    """pyproject.toml's dependencies and every extra's, less the project's references to itself."""
    own = canonicalize_name(PYPROJECT["project"]["name"])
    listed = PYPROJECT["project"]["dependencies"] + functools.reduce(
        operator.iadd, PYPROJECT["project"]["optional-dependencies"].values(), []
    )
    return [r for r in map(Requirement, listed) if canonicalize_name(r.name) != own]


def constraints() -> list[Requirement]:
    lines = (line.split("#")[0].strip() for line in (ROOT / "constraints.txt").read_text().splitlines())
    return [Requirement(line) for line in lines if line]


@pytest.mark.parametrize("source", [requirements, constraints])
def test_lock_pins_every_requirement_within_its_range(source):
    lock = locked()
    for requirement in source():
        name = canonicalize_name(requirement.name)
        assert name in lock, f"{requirement} is not in requirements.lock"
        assert requirement.specifier.contains(lock[name][0], prereleases=True), (str(requirement), lock[name][0])


def test_every_locked_package_has_a_hash_and_torch_is_the_cpu_build():
    lock = locked()
    assert len(lock) > 200
    assert [name for name, (_, hashes) in lock.items() if not hashes] == []
    assert lock["torch"][0].local == "cpu"
    assert [name for name in lock if name.startswith("nvidia-") or name == "triton"] == []


def test_sagemaker_storage_stack_is_current():
    """Unpinned, the resolvers settled on s3fs 0.4.2 (2020) under SageMaker; the lock holds a recent one."""
    assert locked()["s3fs"][0] >= Version("2025")


def test_lock_records_the_inputs_it_was_made_from():
    assert LOCK.read_text().startswith(f"# inputs-sha256: {inputs_sha()} ")


@pytest.fixture
def checkout(tmp_path) -> Path:
    """The files `make` reads to decide whether the lock is current, in a folder of their own."""
    for name in ("Makefile", *INPUTS, "requirements.lock", "tools/lock_inputs_sha.py"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, tmp_path / name)
    return tmp_path


def make(checkout: Path, target: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["make", "--no-print-directory", "-s", target], cwd=checkout, capture_output=True, text=True, timeout=60
    )


def test_a_current_lock_passes_the_check(checkout):
    done = make(checkout, "lock-check")
    assert (done.returncode, done.stderr) == (0, "")


#: an edit of each input that changes what the lock resolves: a package pyproject.toml asks for, a line of the others
PACKAGE_EDITS = {
    ".toml": lambda text: text.replace("dependencies = [", 'dependencies = ["added-after-the-lock",', 1),
    ".txt": lambda text: text + "added-after-the-lock<2\n",
    ".in": lambda text: text + "added-after-the-lock\n",
    # an image table lists its image's packages, or (`same_image_as` another's) the extras it is locked with
    ".json": lambda text: (
        text.replace('"packages": [', '"packages": ["added-after-the-lock==1", ', 1)
        if '"packages": [' in text
        else text.replace('"extras": [', '"extras": ["added-after-the-lock", ', 1)
    ),
}


@pytest.mark.parametrize("changed", INPUTS)
@pytest.mark.parametrize("target", ["lock-check", "install", "test"])
def test_a_stale_lock_stops_make_with_one_sentence(checkout, changed, target):
    edited = checkout / changed
    before = edited.read_text()
    edited.write_text(PACKAGE_EDITS[edited.suffix](before))
    assert edited.read_text() != before, f"no edit of {changed} that changes what the lock resolves"
    done = make(checkout, target)
    assert done.returncode != 0
    assert done.stderr.splitlines()[0] == STALE
    assert not (checkout / ".venv").exists()  # stopped before setting anything up


def test_a_tool_setting_in_pyproject_leaves_the_lock_current(checkout):
    """A lint rule or a pytest option changes no package: `make` must not ask for a new lock."""
    with open(checkout / "pyproject.toml", "a") as edited:
        edited.write('\n[tool.edited-after-the-lock]\nrule = "new"\n')
    done = make(checkout, "lock-check")
    assert (done.returncode, done.stderr) == (0, "")


def test_an_entry_point_in_pyproject_leaves_the_lock_current(checkout):
    """A task or backend registered in nbtoolkit's own entry points names no package: no new lock for it."""
    text = (checkout / "pyproject.toml").read_text()
    group = '[project.entry-points."nbtoolkit.tasks"]\n'
    assert group in text
    (checkout / "pyproject.toml").write_text(text.replace(group, group + 'poem = "poems_nbtoolkit:TASK"\n'))
    done = make(checkout, "lock-check")
    assert (done.returncode, done.stderr) == (0, "")
