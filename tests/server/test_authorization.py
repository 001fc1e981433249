"""The REST API asks the server's Authorizer: a read-only user may list and read jobs but not stop one."""

from __future__ import annotations

import json

import pytest
from jupyter_server.auth import Authorizer
from tornado.httpclient import HTTPClientError

from nbtoolkit.server.handlers import AUTH_RESOURCE

API = "nbtoolkit/api"
ASKED: list[tuple[str, str]] = []


class ReadOnly(Authorizer):
    """A deployment's read-only users: `read` allowed, anything else refused."""

    def is_authorized(self, handler, user, action, resource) -> bool:
        ASKED.append((action, resource))
        return action == "read"


@pytest.fixture
def jp_server_config(home):
    return {"ServerApp": {"jpserver_extensions": {"nbtoolkit.server": True}, "authorizer_class": ReadOnly}}


async def test_a_read_only_user_reads_jobs_but_cannot_stop_one(jp_fetch, store):
    record = store.create(name="running", task="text-classification", backend="local")
    listed = json.loads((await jp_fetch(API, "jobs")).body)
    assert [job["id"] for job in listed["jobs"]] == [record.id]
    with pytest.raises(HTTPClientError) as refused:
        await jp_fetch(API, "jobs", record.id, "stop", method="POST", body="")
    assert refused.value.code == 403
    assert ("read", AUTH_RESOURCE) in ASKED and ("write", AUTH_RESOURCE) in ASKED
    assert store.get(record.id).stop_requested is None  # nothing was asked of the job
