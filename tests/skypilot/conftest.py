"""What the SkyPilot tests share: the interpreter of the real SkyPilot's own environment."""

from __future__ import annotations

from pathlib import Path

import pytest

SKYPILOT_PYTHON = Path(__file__).resolve().parents[2] / ".venv-skypilot" / "bin" / "python"


@pytest.fixture(scope="module")
def skypilot_python() -> str:
    """SkyPilot's own interpreter: skypilot 0.14 cannot join nbtoolkit's environment (click<8.2), so it has its own."""
    if not SKYPILOT_PYTHON.is_file():
        pytest.fail(
            f"{SKYPILOT_PYTHON} is missing: `make test-setup` builds SkyPilot's environment from requirements-skypilot.lock"
        )
    return str(SKYPILOT_PYTHON)
