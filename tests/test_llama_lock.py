"""requirements-llama.lock: what `make llama-env` installs for the GGUF export. It must pin what
tools/llama-requirements.in asks for, each package with hashes, torch as its CPU build."""

from __future__ import annotations

import re
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent
LOCK = ROOT / "requirements-llama.lock"
INPUT = ROOT / "tools" / "llama-requirements.in"


def test_the_llama_lock_pins_its_input_with_hashes_and_torchs_cpu_build():
    locked = {}
    for block in re.split(r"\n(?=\S)", LOCK.read_text()):
        if pinned := re.match(r"([A-Za-z0-9._-]+)==(\S+)", block):
            locked[canonicalize_name(pinned[1])] = (Version(pinned[2]), re.findall(r"--hash=sha256:(\w{64})", block))
    lines = (line.split("#")[0].strip() for line in INPUT.read_text().splitlines())
    for requirement in (Requirement(line) for line in lines if line):
        name = canonicalize_name(requirement.name)
        assert name in locked, f"{requirement} is not in {LOCK.name}: run `make lock`"
        assert requirement.specifier.contains(locked[name][0], prereleases=True), (str(requirement), locked[name][0])
    assert [name for name, (_, hashes) in locked.items() if not hashes] == []
    assert locked["torch"][0].local == "cpu"
    assert [name for name in locked if name.startswith("nvidia-") or name == "triton"] == []
