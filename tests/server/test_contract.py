"""The written REST contract (openapi.yaml) and the response models say the same thing."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

import nbtoolkit.server
from nbtoolkit.server import models
from nbtoolkit.server.extension import ROUTES

OPENAPI = yaml.safe_load((Path(nbtoolkit.server.__file__).parent / "openapi.yaml").read_text())
SCHEMAS = OPENAPI["components"]["schemas"]


def properties(name: str) -> set[str]:
    schema = SCHEMAS[name]
    parts = schema.get("allOf", [schema])
    return {key for part in parts for key in (properties(part["$ref"].rsplit("/", 1)[1]) if "$ref" in part
                                              else part["properties"])}


@pytest.mark.parametrize("model", [models.JobSummary, models.JobDetail, models.JobList, models.MetricsPage,
                                   models.LogPage])
def test_every_response_model_is_documented_field_for_field(model):
    assert properties(model.__name__) == set(model.model_fields)


def test_every_route_is_documented():
    documented = {path.strip("/").replace("{id}", "(?P<job_id>[^/]+)") for path in OPENAPI["paths"]}
    assert documented == {path for path, _ in ROUTES}
