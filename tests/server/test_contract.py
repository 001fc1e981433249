"""The REST contract: openapi.yaml is generated from the response models and routes, is valid OpenAPI, and says what
a real server replies."""

from __future__ import annotations

import json

import pytest
import yaml
from jsonschema import Draft202012Validator
from openapi_spec_validator import validate as validate_openapi  # comes with moto[server], a test dependency

from nbtoolkit.metrics import budget
from nbtoolkit.server import openapi
from tests.server.test_handlers import API, error_of, finished_job

COMMITTED = yaml.safe_load(openapi.DOCUMENT.read_text())


def test_the_committed_openapi_yaml_is_what_the_models_and_routes_make():
    assert openapi.DOCUMENT.read_text() == openapi.render(), (
        "nbtoolkit/server/openapi.yaml differs from the models and routes: run `make api-types` and commit the result"
    )


def test_writing_the_document_writes_what_render_makes(tmp_path, monkeypatch):
    monkeypatch.setattr(openapi, "DOCUMENT", tmp_path / "openapi.yaml")
    openapi.main(["--write"])
    assert (tmp_path / "openapi.yaml").read_text() == openapi.render()
    assert yaml.safe_load(openapi.render()) == COMMITTED


def test_the_document_is_valid_openapi_3_1():
    validate_openapi(openapi.document())


def test_the_status_enum_is_in_the_document_and_every_status_field_refers_to_it():
    schemas = COMMITTED["components"]["schemas"]
    assert schemas["JobStatus"]["enum"] == ["queued", "running", "succeeded", "failed", "stopped", "lost"]
    for body in ("JobSummary", "JobDetail", "MetricsPage", "LogPage"):
        assert schemas[body]["properties"]["status"] == {"$ref": "#/components/schemas/JobStatus"}
    status_filter = COMMITTED["paths"]["/jobs"]["get"]["parameters"][0]
    assert status_filter["name"] == "status"
    assert status_filter["schema"] == {"items": {"$ref": "#/components/schemas/JobStatus"}, "type": "array"}


def test_every_route_is_in_the_document_with_its_verb():
    documented = {(verb, path) for path, item in COMMITTED["paths"].items() for verb in item if verb != "parameters"}
    assert documented == {
        ("get", "/jobs"),
        ("get", "/jobs/{id}"),
        ("get", "/jobs/{id}/metrics"),
        ("get", "/jobs/{id}/log"),
        ("post", "/jobs/{id}/stop"),
        ("get", "/jobs/{id}/health"),
        ("post", "/jobs/{id}/stacks"),
        ("post", "/jobs/{id}/checkpoint"),
        ("post", "/jobs/{id}/fork"),
    }


def conforms(body: dict, schema: str) -> None:
    """Fails, naming the field, unless `body` is what the document says schema `schema` is."""
    document = {"$ref": f"#/components/schemas/{schema}", "components": COMMITTED["components"]}
    Draft202012Validator(document).validate(body)


async def test_what_a_real_server_replies_is_what_the_document_says(jp_fetch, store):
    warned = budget.budget_record(time=1050.0, step=12, cost_usd=0.09, budget_usd=0.1, state="warning")
    done = finished_job(store, info={"hourly_price_usd": 3.6, budget.INFO_KEY: warned})
    queued = store.create(name="waiting", task="text-classification", backend="local")

    listed = json.loads((await jp_fetch(API, "jobs")).body)
    conforms(listed, "JobList")
    rows = {row["id"]: row for row in listed["jobs"]}
    assert (rows[done.id]["status"], rows[done.id]["active"]) == ("succeeded", False)
    assert (rows[queued.id]["status"], rows[queued.id]["active"]) == ("queued", True)
    assert rows[done.id]["budget"]["summary"] == "$0.09 of the $0.10 budget spent (90%) at step 12"

    conforms(json.loads((await jp_fetch(API, "jobs", done.id)).body), "JobDetail")
    conforms(json.loads((await jp_fetch(API, "jobs", done.id, "metrics", params={"since": 0})).body), "MetricsPage")
    conforms(json.loads((await jp_fetch(API, "jobs", done.id, "log")).body), "LogPage")
    code, refused = await error_of(jp_fetch(API, "jobs", "0badc0de"))
    assert code == 404
    conforms(refused, "ErrorMessage")


@pytest.mark.parametrize(
    "body,schema",
    [
        ({"message": 3}, "ErrorMessage"),
        ({"text": "", "offset": 0, "next": 0, "size": 0, "status": "paused"}, "LogPage"),
    ],
)
def test_a_body_unlike_the_document_fails_the_check(body, schema):
    from jsonschema import ValidationError

    with pytest.raises(ValidationError):
        conforms(body, schema)
