"""`model: job:ID`: what each refusal says, before anything starts, and a fetch that never leaves half a model.

The chains themselves run for real in tests/test_adapters.py (local and torchrun, from an adapter job) and
tests/test_sagemaker_standin.py (SageMaker to SageMaker through an input channel, the model fetched back).
"""

from __future__ import annotations

import hashlib

import pytest

from nbtoolkit import chains
from nbtoolkit.api import launch, plan
from nbtoolkit.artifacts import FETCHED_FROM, ModelArtifact, fetch, model_artifact
from nbtoolkit.backends import LaunchError, dispatch
from nbtoolkit.backends.sagemaker import render as sagemaker_render
from nbtoolkit.backends.sagemaker.model_data import check_download
from nbtoolkit.backends.sagemaker.standin import BUCKET, ROLE
from nbtoolkit.runner.store import JobStatus
from nbtoolkit.spec import SpecError, load_spec

SAGEMAKER = {
    "hardware": {"target": "sagemaker", "instance_type": "ml.g5.2xlarge"},
    "sagemaker": {"role": ROLE, "region": "us-east-1", "bucket": BUCKET},
}


def ended_job(store, status: str, *, name: str = "sft", backend: str = "local", info: dict | None = None):
    """A job record that ended as `status`, its folder holding the bundled tiny model's spec (nothing ran)."""
    record = store.create(name=name, task="causal-lm", backend=backend, info=info)
    store.update(record.id, status=JobStatus(status))
    (store.job_dir(record.id) / "spec.json").write_text(load_spec({"task": "causal-lm"}).model_dump_json())
    if status == "succeeded" and backend == "local":
        (store.job_dir(record.id) / "output" / "model").mkdir(parents=True)
    return store.get(record.id)


def test_a_job_reference_that_names_no_job_or_a_failed_one_is_one_sentence(store):
    with pytest.raises(LaunchError) as caught:
        launch({"task": "causal-lm", "model": "job:no-such-run"}, store=store)
    assert str(caught.value) == "model 'job:no-such-run': no job has that id or name; `nbtoolkit jobs` lists them"
    failed = ended_job(store, "failed")
    with pytest.raises(LaunchError) as caught:
        launch({"task": "causal-lm", "model": "job:sft"}, store=store)
    assert str(caught.value) == f"job {failed.id} is failed; only a succeeded job has a final model"
    with pytest.raises(LaunchError, match="names no job; write job:ID or job:NAME"):
        launch({"task": "causal-lm", "model": "job:"}, store=store)


def test_a_name_means_its_newest_succeeded_job(store):
    older = ended_job(store, "succeeded")
    ended_job(store, "failed")  # newer, but it left no model
    assert chains.earlier_job("job:sft", store).id == older.id


def test_a_sagemaker_run_never_gets_a_model_folder_of_this_machine(store):
    local = ended_job(store, "succeeded")
    with pytest.raises(LaunchError) as caught:
        launch({"task": "causal-lm", "model": f"job:{local.id}", **SAGEMAKER}, store=store)
    assert str(caught.value).startswith(
        f"model 'job:{local.id}': job {local.id}'s model is at file://{store.job_dir(local.id)}/output/model, "
        "which a sagemaker job cannot read;"
    )


def test_a_sagemaker_run_reads_an_earlier_sagemaker_jobs_model_data_as_is(store):
    uri = "s3://bucket/sft/sft-1/output/model.tar.gz"
    remote = ended_job(store, "succeeded", backend="sagemaker", info={"model_uri": uri})
    chained = chains.resolve(load_spec({"task": "causal-lm", "model": f"job:{remote.id}", **SAGEMAKER}), store)
    assert chained.spec.model == uri
    assert chained.sizing.model == "nbtoolkit/tiny-gpt2"  # the shape: the model the earlier job started from
    assert chained.info == {"model_from": remote.id, "model_ref": f"job:{remote.id}"}
    # a plan on this machine of a run from it sizes that shape and downloads nothing
    planned = plan({"task": "causal-lm", "model": f"job:{remote.id}"}, store=store)
    assert planned.model == "nbtoolkit/tiny-gpt2"
    assert not (store.job_dir(remote.id) / "output" / "model").exists()


def test_a_job_reference_is_resolved_at_launch_not_rendered_raw():
    with pytest.raises(LaunchError, match="names an earlier job, which is resolved as the run is launched"):
        dispatch.render(load_spec({"task": "causal-lm", "model": "job:abc"}))


def test_a_url_model_is_for_sagemaker_only():
    with pytest.raises(SpecError) as caught:
        load_spec({"task": "causal-lm", "model": "s3://bucket/model.tar.gz"})
    assert str(caught.value).startswith("model 's3://bucket/model.tar.gz' is a URL, which only a SageMaker job reads")
    assert load_spec({"task": "causal-lm", "model": "s3://bucket/model.tar.gz", **SAGEMAKER}).model


def test_a_fetch_cut_short_leaves_no_model_and_the_next_one_completes(store, monkeypatch):
    remote = ended_job(store, "succeeded", backend="sagemaker", info={"model_uri": "s3://bucket/m/output/model.tar.gz"})
    artifact = model_artifact(store, remote)

    def cut_short(uri, folder, *, region=None):
        (folder / "config.json").write_text("{}")
        raise LaunchError("the network went away")

    monkeypatch.setattr(sagemaker_render, "fetch_model", cut_short)
    with pytest.raises(LaunchError, match="the network went away"):
        fetch(artifact)
    assert not artifact.folder.exists() and not artifact.here
    assert list(artifact.folder.parent.iterdir()) == []  # no scratch folder left behind

    def whole(uri, folder, *, region=None):
        (folder / "config.json").write_text("{}")

    monkeypatch.setattr(sagemaker_render, "fetch_model", whole)
    assert fetch(artifact) == artifact.folder and artifact.here
    assert (artifact.folder / FETCHED_FROM).is_file()
    monkeypatch.setattr(sagemaker_render, "fetch_model", cut_short)
    assert fetch(artifact) == artifact.folder  # fetched once: not again


def test_a_download_that_differs_from_s3_is_refused(tmp_path):
    archive = tmp_path / "model.tar.gz.part"
    archive.write_bytes(b"model bytes")
    md5 = hashlib.md5(b"model bytes").hexdigest()
    check_download(archive, 11, f'"{md5}"', "s3://b/k")  # what S3 holds
    check_download(archive, 11, '"0123-2"', "s3://b/k")  # a multipart ETag is no MD5: the size is checked
    with pytest.raises(LaunchError, match="is 11 bytes, not S3's 12; fetch it again"):
        check_download(archive, 12, f'"{md5}"', "s3://b/k")
    with pytest.raises(LaunchError, match="does not match S3's checksum"):
        check_download(archive, 11, '"ffffffffffffffffffffffffffffffff"', "s3://b/k")


def test_an_artifact_of_this_machine_is_its_folder(tmp_path):
    folder = tmp_path / "model"
    artifact = ModelArtifact("abc", folder.as_uri(), folder, "local")
    assert not artifact.remote and not artifact.here
    folder.mkdir()
    assert artifact.here and fetch(artifact) == folder
