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
    """The stand-in, its variables set for this test and every process it starts (no real AWS profile).

    The test fails if the SDK schedules a telemetry event: its opt-out (the stand-in's SDK config) must hold.
    Every SDK v3 event goes through telemetry_logging._send_telemetry_request (sagemaker-core 2.27.0,
    sagemaker/core/telemetry/telemetry_logging.py:397, 411, 519), which sends to AWS outside the stand-in (:583)."""
    from sagemaker.core.telemetry import telemetry_logging

    for key in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE"):
        monkeypatch.delenv(key, raising=False)
    for key, value in standin_server.env.items():
        monkeypatch.setenv(key, value)
    standin_server.run_containers = True
    telemetry: list[tuple] = []
    monkeypatch.setattr(telemetry_logging, "_send_telemetry_request", lambda *event: telemetry.append(event))
    yield standin_server
    assert not telemetry, f"the SageMaker SDK tried to send telemetry: {telemetry}"
