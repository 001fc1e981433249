"""Fixtures: the local SageMaker stand-in (nbtoolkit.backends.sagemaker.standin), one per test session."""

from __future__ import annotations

import pytest

from nbtoolkit.backends.sagemaker.standin import SageMakerStandIn


def sdk_config_validation_against_a_schema_checked_once():
    """The SageMaker SDK's config check, as jsonschema.validate does it but with the SDK's own schema checked against
    the JSON Schema meta-schema once, not on every lookup.

    The stand-in's SDK config (its telemetry opt-out) is not empty, so the SDK validates it on every config lookup
    (sagemaker-core 2.27.0: common_utils.py:1295-1298, config/config_manager.py:314-317) with jsonschema.validate
    (config_manager.py:92-95), which first checks the schema itself (jsonschema 4.26.0, validators.py:1325-1332):
    0.13 s of CPU each, 11 of a submit's 12 checks. The 12th, as the config file is loaded, stays the SDK's own
    (config/config.py:145, 164). Checking the config itself takes 0.1 ms."""
    from jsonschema import exceptions, validators
    from sagemaker.core.config.config_schema import SAGEMAKER_PYTHON_SDK_CONFIG_SCHEMA

    cls = validators.validator_for(SAGEMAKER_PYTHON_SDK_CONFIG_SCHEMA)
    cls.check_schema(SAGEMAKER_PYTHON_SDK_CONFIG_SCHEMA)
    validator = cls(SAGEMAKER_PYTHON_SDK_CONFIG_SCHEMA)

    def validate(sagemaker_config: dict | None = None) -> None:
        error = exceptions.best_match(validator.iter_errors(sagemaker_config))
        if error is not None:
            raise error

    return validate


@pytest.fixture(scope="session")
def standin_server(tmp_path_factory):
    from sagemaker.core.config.config_manager import SageMakerConfig

    with pytest.MonkeyPatch.context() as patch, SageMakerStandIn(tmp_path_factory.mktemp("standin")) as standin:
        patch.setattr(
            SageMakerConfig,
            "validate_sagemaker_config",
            staticmethod(sdk_config_validation_against_a_schema_checked_once()),
        )
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
