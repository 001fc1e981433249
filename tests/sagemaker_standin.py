"""Fixtures: the local SageMaker stand-in (nbtoolkit.backends.sagemaker.standin), one per test session."""

from __future__ import annotations

import pytest

from nbtoolkit.backends.sagemaker.standin import SageMakerStandIn


@pytest.fixture(scope="session")
def standin_server(tmp_path_factory):
    standin = SageMakerStandIn(tmp_path_factory.mktemp("standin"))
    with standin:
        yield standin


@pytest.fixture
def standin(standin_server, monkeypatch):
    """The stand-in, its variables set for this test and every process it starts (no real AWS profile)."""
    for key in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE"):
        monkeypatch.delenv(key, raising=False)
    for key, value in standin_server.env.items():
        monkeypatch.setenv(key, value)
    standin_server.run_containers = True
    return standin_server
