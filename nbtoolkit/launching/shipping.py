"""nbtoolkit's program as a folder that runs where nbtoolkit is not installed: the package, and its distribution's
metadata as an install leaves it. A SageMaker job's code folder is one (nbtoolkit.backends.sagemaker.code), and a
rehearsal in an image's packages (nbtoolkit.rehearsal.image_envs) runs the program from one, as that image would.

The container runs the entry script from that folder without installing nbtoolkit, so the folder is the first
entry of its `sys.path`. The metadata (METADATA and entry_points.txt) is what makes it nbtoolkit's distribution
there: the spec's backends and tasks are entry points (`nbtoolkit.backends`, `nbtoolkit.tasks`), and without them
the spec the program loads names a target no backend provides or a task none registers, and the job fails at start,
billed. Light: copies files.
"""

from __future__ import annotations

import importlib.metadata
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nbtoolkit.spec import RunSpec

#: the distribution whose metadata the folder carries (pyproject.toml's project name)
DISTRIBUTION = "nbtoolkit-finetune"
#: what of the installed package a container does not need
PACKAGE_IGNORE = ("__pycache__", "*.pyc", "labextension", "static")


def ship_package(code: Path) -> None:
    """Copy the installed nbtoolkit package and its distribution's METADATA and entry points into `code`, in place
    of any earlier copy (two versions' metadata side by side, the container could read the older one's)."""
    for stale in [code / "nbtoolkit", *code.glob(f"{DISTRIBUTION.replace('-', '_')}-*.dist-info")]:
        shutil.rmtree(stale, ignore_errors=True)  # an earlier copy (an exported script run again after an upgrade)
    shutil.copytree(
        Path(__file__).resolve().parents[1],  # the package this module's room is part of
        code / "nbtoolkit",
        dirs_exist_ok=True,
        ignore=shutil.ignore_patterns(*PACKAGE_IGNORE),
    )
    installed = importlib.metadata.distribution(DISTRIBUTION)
    info = code / f"{DISTRIBUTION.replace('-', '_')}-{installed.version}.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    for name in ("METADATA", "entry_points.txt"):
        (info / name).write_text(installed.read_text(name) or "")


def task_not_carried(spec: RunSpec, job: str) -> str | None:
    """Why a `job` (in words: "a sagemaker job") that carries nbtoolkit alone cannot run the spec's task: one another
    distribution registers, which its container never installs; None for nbtoolkit's own, or a script of the user's
    (nbtoolkit's program, which reads the task, does not run)."""
    from packaging.utils import canonicalize_name  # as pip compares names: nbtoolkit_finetune is nbtoolkit-finetune

    from nbtoolkit.tasks import DISTRIBUTIONS  # the registry: not needed to copy files (exported scripts do)

    source = DISTRIBUTIONS.get(spec.task, "")
    if spec.script is not None or canonicalize_name(source) == DISTRIBUTION:
        return None
    return (
        f"task '{spec.task}' comes from the distribution {source}, which {job} does not carry (it has nbtoolkit "
        "alone); train it on hardware.target local or slurm, which run in this environment, where it is installed"
    )
