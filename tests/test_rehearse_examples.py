"""Every example notebook's real run (notebooks/specs/, the specs behind the golden launches) rehearses
here, two ranks wide, before anyone pays for it (a file of its own, so pytest -n runs it beside the rest)."""

from __future__ import annotations

import pytest

from nbtoolkit.api import Job
from nbtoolkit.rehearse import STEPS, rehearse
from tests.real_launches import real_specs

pytestmark = pytest.mark.heavy  # minutes of real training: run first under pytest -n (tests/conftest.py)


@pytest.mark.parametrize("name", sorted(real_specs()))
def test_every_example_notebooks_real_run_rehearses_here(name, store, tmp_path):
    """Each notebooks/specs/ file (the real runs behind the goldens), two ranks wide, for real."""
    report = rehearse(real_specs()[name], workdir=tmp_path, store=store, timeout=600, max_ranks=2)
    assert report.passed, report
    assert "the planner predicts" in report.memory
    # every rank trained the rehearsal's steps (a sample too small for its ranks x batch trained none)
    steps = {
        record["step"]
        for job_id in report.jobs
        for record in Job(job_id, store).records()
        if record["kind"] == "summary"
    }
    assert steps == {STEPS}, steps
