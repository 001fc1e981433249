"""A whole-number query argument too large for an offset (SQLite's and seek()'s 64 bits overflowed: a 500)
is a 400 with one sentence, on every endpoint that takes one."""

from __future__ import annotations

import pytest

from tests.server.test_handlers import API, error_of, finished_job

HUGE = str(10**30)


@pytest.mark.parametrize(
    "path, name",
    [(("jobs",), "offset"), (("jobs", "{id}", "log"), "offset"), (("jobs", "{id}", "metrics"), "since")],
)
async def test_a_huge_offset_is_400_with_a_sentence(jp_fetch, store, path, name):
    job = finished_job(store)
    parts = [part.format(id=job.id) for part in path]
    code, body = await error_of(jp_fetch(API, *parts, params={name: HUGE}))
    assert code == 400
    assert body["message"] == (
        f"{name} '{HUGE}' is too large; use a whole number from -9007199254740991 to 9007199254740991"
    )
