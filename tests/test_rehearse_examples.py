"""Every example notebook's real run (notebooks/specs/, the specs behind the golden launches) rehearses
here, two ranks wide, before anyone pays for it (a file of its own, so pytest -n runs it beside the rest)."""

from __future__ import annotations

import inspect

import pytest

from nbtoolkit.api import Job
from nbtoolkit.rehearse import STEPS, rehearsal, rehearse
from nbtoolkit.tasks.causal_lm import train as causal_lm
from tests.real_launches import real_specs

pytestmark = pytest.mark.heavy  # minutes of real training: run first under pytest -n (tests/conftest.py)

#: a real run whose rehearsal trains exactly as another's does -> that other one (rehearsed once, for both)
SAME_REHEARSAL = {"gpt2-wikitext-sagemaker-eager": "gpt2-wikitext-sagemaker"}


@pytest.mark.parametrize("name", sorted(set(real_specs()) - set(SAME_REHEARSAL)))
def test_every_example_notebooks_real_run_rehearses_here(name, store, tmp_path):
    """Each notebooks/specs/ file (the real runs behind the goldens), two ranks wide, for real."""
    report = rehearse(real_specs()[name], workdir=tmp_path, store=store, timeout=600, max_ranks=2)
    assert report.passed, "\n".join([str(report), *(Job(job_id, store).logs(tail=40) for job_id in report.jobs)])
    assert "the planner predicts" in report.memory
    # every rank trained the rehearsal's steps (a sample too small for its ranks x batch trained none)
    steps = {
        record["step"]
        for job_id in report.jobs
        for record in Job(job_id, store).records()
        if record["kind"] == "summary"
    }
    assert steps == {STEPS}, steps


def differing(a: object, b: object, path: str = "") -> set[str]:
    """The dotted paths where two JSON-like values differ."""
    if isinstance(a, dict) and isinstance(b, dict):
        return {found for key in a.keys() | b.keys() for found in differing(a.get(key), b.get(key), f"{path}.{key}")}
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return {
            found for index, pair in enumerate(zip(a, b, strict=True)) for found in differing(*pair, f"{path}[{index}]")
        }
    return set() if a == b else {path}


@pytest.mark.parametrize(("name", "rehearsed_as"), sorted(SAME_REHEARSAL.items()))
def test_a_run_left_out_above_rehearses_exactly_as_the_one_that_stands_for_it(name, rehearsed_as):
    """The eager half of GPT-2's compiled comparison pads to max length, which causal-lm never reads (it packs
    the text into equal blocks): same model, data, ranks and steps, so one rehearsal answers for both."""
    ours, theirs = rehearsal(real_specs()[name], max_ranks=2), rehearsal(real_specs()[rehearsed_as], max_ranks=2)
    found = differing(ours.specs, theirs.specs)
    assert {path.split(".", 1)[1] for path in found} == {"name", "hardware.master_port", "dataset.pad_to_max_length"}
    assert ours.specs[0]["task"] == "causal-lm" and "pad_to_max_length" not in inspect.getsource(causal_lm)
    assert (ours.model_config, ours.samples, ours.notes) == (theirs.model_config, theirs.samples, theirs.notes)
