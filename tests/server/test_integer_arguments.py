"""A whole-number query argument too large for an offset (SQLite's and seek()'s 64 bits overflowed: a 500)
is a 400 with one sentence, on every endpoint that takes one."""

from __future__ import annotations

import pytest

from nbtoolkit.metrics.series import METRICS_FILE
from nbtoolkit.runner.store import LOG_FILE
from tests.server.test_handlers import API, error_of, finished_job, get_json

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
    assert body == {"message": f"{name} '{HUGE}' is too large; use a whole number up to 9007199254740991"}


@pytest.mark.parametrize("value", ["\uff11", "\u0663", "1_0"])
async def test_only_ascii_digits_are_a_whole_number(jp_fetch, store, value):
    """int() also takes fullwidth and Arabic-Indic digits and underscores; a cursor is ASCII digits."""
    code, body = await error_of(jp_fetch(API, "jobs", finished_job(store).id, "metrics", params={"since": value}))
    assert code == 400 and body == {"message": f"since '{value}' is not a whole number"}


async def test_an_out_of_range_argument_is_the_same_shape_of_400(jp_fetch, store):
    code, body = await error_of(jp_fetch(API, "jobs", finished_job(store).id, "metrics", params={"since": "-1"}))
    assert code == 400 and body == {"message": "since -1 is out of range; use 0 or more"}


async def test_the_largest_offset_reads_past_the_end_as_an_empty_page(jp_fetch, store):
    """2**53-1 is valid but past every file: an empty page whose cursor is the file's size, not a 500 from
    seek(); and the job list counts its total instead of adding the offset."""
    job = finished_job(store)
    directory, largest = store.job_dir(job.id), 2**53 - 1
    metrics = await get_json(jp_fetch, "jobs", job.id, "metrics", since=largest)
    assert metrics["records"] == [] and metrics["next"] == (directory / METRICS_FILE).stat().st_size
    log = await get_json(jp_fetch, "jobs", job.id, "log", offset=largest)
    assert log["text"] == "" and log["next"] == (directory / LOG_FILE).stat().st_size
    listed = await get_json(jp_fetch, "jobs", offset=largest)
    assert listed["jobs"] == [] and listed["total"] == 1
