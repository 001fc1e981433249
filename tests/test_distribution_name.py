"""`pip install nbtoolkit` installs another project (PyPI's "nbtoolkit" extracts images from notebooks):
every install line this project shows names its own distribution, nbtoolkit-finetune."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import tomllib

ROOT = Path(__file__).resolve().parent.parent
NAME = "nbtoolkit-finetune"
SHOWN = [
    "README.md",
    *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").rglob("*.md")),
    "binder/postBuild",
    "tools/check_wheel_without_node.sh",
    *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "notebooks").glob("*.ipynb")),
    *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "nbtoolkit").rglob("*.py")),
]
#: `pip install` naming the import name, bare or with extras, quoted or not
FOREIGN = re.compile(r"pip install (?:-\S+ )*['\"]?nbtoolkit(?![\w-])")


def test_the_distribution_is_named_nbtoolkit_finetune():
    assert tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["name"] == NAME


@pytest.mark.parametrize("path", SHOWN)
def test_no_install_line_names_the_other_project(path):
    assert FOREIGN.findall((ROOT / path).read_text()) == []


def test_the_pattern_catches_the_old_lines():
    for line in ("pip install nbtoolkit", "pip install 'nbtoolkit[sagemaker]'", "pip install -q nbtoolkit[lab]"):
        assert FOREIGN.search(line), line
    assert not FOREIGN.search(f"pip install '{NAME}[sagemaker]'")
