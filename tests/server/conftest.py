"""pytest-jupyter's server fixtures (jp_fetch, jp_serverapp, ...) for the REST API tests only,
with the nbtoolkit server extension loaded over this test's fresh job store."""

from __future__ import annotations

import pytest
from pytest_jupyter.jupyter_server import *  # noqa: F403  (fixtures and async test hooks, this folder only)


@pytest.fixture
def jp_server_config(home):
    """The extension reads $NBTOOLKIT_HOME when it loads: `home` sets it first."""
    return {"ServerApp": {"jpserver_extensions": {"nbtoolkit.server": True}}}
