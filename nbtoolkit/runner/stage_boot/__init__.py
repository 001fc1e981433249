"""The stage boot's folder, put first on PYTHONPATH for every torch process of nbtoolkit's own that starts here:
a job's stages on this machine (through its supervisor's environment) and the kernel's helpers (evaluate, merge,
the warm model). Its sitecustomize.py says why: they exit without the final garbage collections."""

from __future__ import annotations

import os
from pathlib import Path

STAGE_BOOT = Path(__file__).resolve().parent


def with_stage_boot(pythonpath: str | None) -> str:
    """PYTHONPATH with the stage boot first, unless one of nbtoolkit's boot folders is first already."""
    entries = pythonpath.split(os.pathsep) if pythonpath else []
    if entries and Path(entries[0]).resolve().is_relative_to(STAGE_BOOT.parent.parent):
        return os.pathsep.join(entries)
    return os.pathsep.join([str(STAGE_BOOT), *entries])


def booted_env() -> dict[str, str]:
    """This process's environment with the stage boot first on PYTHONPATH, for a torch program it starts."""
    return {**os.environ, "PYTHONPATH": with_stage_boot(os.environ.get("PYTHONPATH"))}
