"""Every real launch rehearsed in the packages of the image it meets (`nbtoolkit rehearse SPEC --image-env`): the
training program, shipped as a SageMaker job's code folder carries it, trains its tiny model under the image's
transformers, accelerate, datasets, PEFT and TRL (tests/facts/images), two ranks wide. Run apart by `make
test-images`, which builds the environments first (`make image-envs`); a missing one fails with that command."""

from __future__ import annotations

import pytest

from nbtoolkit.api import Job
from nbtoolkit.rehearsal.image_envs import BUILD, REPORTED, is_built, stack_of
from nbtoolkit.rehearsal.rehearse import STEPS, rehearse
from nbtoolkit.spec_parts.blocks import AdapterSpec
from tests.real_launches import as_launched, real_specs
from tests.test_image_envs import ON_THE_LOCK

#: rehearsed as another launch is (tests/test_rehearse_examples.py: the same model, data, ranks and steps), and
#: FLAN-T5, whose machine runs nbtoolkit's own lock: its rehearsal is the plain one there (155 s here under
#: --image-env, the same run)
SAME_REHEARSAL = {"gpt2-wikitext-sagemaker-eager", *ON_THE_LOCK}


@pytest.mark.parametrize("name", sorted(set(real_specs()) - SAME_REHEARSAL))
def test_every_real_launch_trains_in_its_images_packages(name, store, tmp_path):
    spec = as_launched(name, real_specs()[name])
    stack = stack_of(spec)
    assert stack is not None
    if not is_built(stack):
        pytest.fail(f"the environment of image {stack.name} is not built: run `{BUILD}`")
    report = rehearse(real_specs()[name], workdir=tmp_path, store=store, timeout=600, max_ranks=2, image_env=True)
    assert report.passed, "\n".join([str(report), *(Job(job_id, store).logs(tail=40) for job_id in report.jobs)])
    steps = {
        record["step"]
        for job_id in report.jobs
        for record in Job(job_id, store).records()
        if record["kind"] == "summary"
    }
    assert steps == {STEPS}, steps
    assert report.environment is not None and report.environment.startswith(f"image environment {stack.name} ")
    for package in stack.packages:  # the image's own versions, where requirements.txt keeps them, are what ran
        if package in stack.requirements() and "==" in package and package.split("[")[0].split("==")[0] in REPORTED:
            name_, version = package.split("==")
            assert f"{name_.split('[')[0]} {version}" in report.environment, (package, report.environment)
    # the program ran from the shipped code folder, under the image environment's Python
    launched = Job(report.jobs[0], store).dir / "launch.json"
    assert str(stack.folder) in launched.read_text()


def test_an_adapter_trains_on_trainium_in_the_neuron_images_own_peft(store, tmp_path):
    """A Trainium run's requirements.txt names PEFT without a version (the Neuron SDK's optimum-neuron 0.4.1 pins
    0.17.0, below the GPU floor's 0.17.1), so the program must train its adapter with the image's own."""
    spec = real_specs()["bert-emotion-trainium"].model_copy(update={"adapter": AdapterSpec(r=8)})
    stack = stack_of(as_launched("bert-emotion-trainium", spec))
    if not is_built(stack):
        pytest.fail(f"the environment of image {stack.name} is not built: run `{BUILD}`")
    report = rehearse(spec, workdir=tmp_path, store=store, timeout=600, max_ranks=2, image_env=True)
    assert report.passed, "\n".join([str(report), *(Job(job_id, store).logs(tail=40) for job_id in report.jobs)])
    assert "peft 0.17.0" in report.environment
