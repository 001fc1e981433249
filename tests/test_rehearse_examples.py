"""Every example notebook's real run (notebooks/specs/, the specs behind the golden launches) rehearses
here before anyone pays for it (a file of its own, so pytest -n runs it beside the rest): two ranks wide, or one
where a two-rank rehearsal of another run already takes the same launch (`ONE_RANK`)."""

from __future__ import annotations

import inspect

import pytest

from nbtoolkit.api import Job
from nbtoolkit.backends import dispatch
from nbtoolkit.inputs.bundled import is_bundled
from nbtoolkit.rehearsal.rehearse import STEPS, rehearsal, rehearse
from nbtoolkit.spec import load_spec
from nbtoolkit.tasks.causal_lm import train as causal_lm
from tests.real_launches import real_specs

pytestmark = pytest.mark.heavy  # minutes of real training: run first under pytest -n (tests/conftest.py)

#: the model a rehearsal spec's launch is rendered with (the rehearsal builds its own tiny one only when it runs)
TINY = "nbtoolkit/tiny-bert"
#: a real run whose rehearsal trains exactly as another's does -> that other one (rehearsed once, for both)
SAME_REHEARSAL = {"gpt2-wikitext-sagemaker-eager": "gpt2-wikitext-sagemaker"}
#: a run rehearsed on one rank -> the run whose two-rank rehearsal takes the same launch (backend, nodes, ranks per
#: node, strategy): a second rank of its own would check that launch again, at twice the CPU on a 2-core machine.
#: Each launcher family keeps a two-rank rehearsal: torchrun on one node (Neuron's workers on CPU) in T5-small's,
#: DeepSpeed in FLAN-T5's, SageMaker's nodes on loopback in GPT-2's compiled run (which also keeps torch.compile
#: under DDP); the chat runs are one GPU each, so one rank already
ONE_RANK = {
    "bert-emotion-trainium": "t5-small-trainium",
    "t5-large-trainium": "t5-small-trainium",
    "gpt2-wikitext-sagemaker": "gpt2-wikitext-sagemaker-torch.compile",
    "bert-qa-sagemaker": "gpt2-wikitext-sagemaker-torch.compile",
}


@pytest.mark.parametrize("name", sorted(set(real_specs()) - set(SAME_REHEARSAL)))
def test_every_example_notebooks_real_run_rehearses_here(name, store, tmp_path):
    """Each notebooks/specs/ file (the real runs behind the goldens), two ranks wide (one in ONE_RANK), for real."""
    ranks = 1 if name in ONE_RANK else 2
    report = rehearse(real_specs()[name], workdir=tmp_path, store=store, timeout=600, max_ranks=ranks)
    assert report.rehearsal.ranks == min(ranks, real_specs()[name].world_size)
    assert report.passed, "\n".join([str(report), *(Job(job_id, store).logs(tail=40) for job_id in report.jobs)])
    assert "the planner predicts" in report.memory
    # the tiny model was built from the real config, or (a vision-language model) the task's bundled one stood in
    trained = Job(report.jobs[0], store).spec.model_name
    assert (tmp_path / "model" / "config.json").is_file() if report.rehearsal.model_config else is_bundled(trained)
    # a run of several nodes rehearses as that many jobs on loopback, each node's stage said apart
    nodes = len(report.rehearsal.specs)
    assert len(report.jobs) == nodes and [stage.line(nodes) for stage in report.stages] == (
        [f"stage train (node {node}): passed" for node in range(nodes)] if nodes > 1 else ["stage train: passed"]
    )
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


def launch_shape(name: str) -> tuple:
    """What a run's two-rank rehearsal launches: its backend, nodes, ranks per node and strategy."""
    first = rehearsal(real_specs()[name], max_ranks=2).specs[0]
    hardware, backend = first["hardware"], dispatch.render(load_spec({**first, "model": TINY})).backend
    return backend, hardware["nodes"], hardware["devices"], first["parallelism"]["strategy"]


@pytest.mark.parametrize(("name", "covered_by"), sorted(ONE_RANK.items()))
def test_a_run_rehearsed_on_one_rank_has_its_two_rank_launch_rehearsed_by_another(name, covered_by):
    assert covered_by not in ONE_RANK and launch_shape(name) == launch_shape(covered_by)
    assert real_specs()[name].world_size > 1  # else it rehearses on one rank anyway
