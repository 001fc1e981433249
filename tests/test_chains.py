"""`model: job:ID`: what each refusal says, before anything starts, and a fetch that never leaves half a model.

The chains themselves run for real in tests/test_adapters.py (local and torchrun, from an adapter job) and
tests/test_sagemaker_standin.py (SageMaker to SageMaker through an input channel, the model fetched back).
"""

from __future__ import annotations

import hashlib
import json

import pytest

from nbtoolkit.api import launch, plan
from nbtoolkit.backends import LaunchError, dispatch
from nbtoolkit.backends.sagemaker import render as sagemaker_render
from nbtoolkit.backends.sagemaker.model_data import check_download
from nbtoolkit.backends.sagemaker.standin import BUCKET, ROLE
from nbtoolkit.lineage import chains
from nbtoolkit.runner.store import JobStatus
from nbtoolkit.spec import SpecError, load_spec
from nbtoolkit.trained_model.artifacts import FETCHED_FROM, ModelArtifact, fetch, model_artifact

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
    assert str(caught.value) == (
        f"model 'job:sft': job {failed.id} is failed, and only a succeeded job has a final model to start from; train "
        "it again, or name a succeeded job (`nbtoolkit jobs` lists them)"
    )
    with pytest.raises(LaunchError, match="names no job; write job:ID or job:NAME"):
        launch({"task": "causal-lm", "model": "job:"}, store=store)


def test_a_name_means_its_newest_succeeded_job_and_wins_over_an_id_it_begins(store):
    older = ended_job(store, "succeeded")
    ended_job(store, "failed")  # newer, but it left no model
    assert chains.earlier_job("job:sft", store).id == older.id
    # a short name made of hex digits is the job of that name, not one whose id it begins
    for first in "0123456789abcdef":
        if not older.id.startswith(first):
            named = ended_job(store, "succeeded", name=first)
            break
    assert chains.earlier_job(f"job:{first}", store).id == named.id
    assert chains.earlier_job(f"job:{older.id[:6]}", store).id == older.id  # an id prefix of no name


def test_an_id_prefix_of_several_jobs_says_so(store):
    records = [ended_job(store, "succeeded", name=f"run-{index}") for index in range(40)]
    first = sorted(record.id[0] for record in records)
    shared = next(digit for digit in first if first.count(digit) > 1)  # 40 ids: some share a first digit
    with pytest.raises(LaunchError) as caught:
        chains.earlier_job(f"job:{shared}", store)
    assert str(caught.value) == (
        f"model 'job:{shared}': {first.count(shared)} jobs have ids starting '{shared}'; give more of the id"
    )


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
    tiny = plan({"task": "causal-lm"}, store=store).summary_lines()[0].removeprefix("nbtoolkit/tiny-gpt2")
    assert planned.model == f"job:{remote.id}" and planned.summary_lines()[0] == f"job:{remote.id}{tiny}"
    assert not (store.job_dir(remote.id) / "output" / "model").exists()


def test_an_attached_job_without_a_spec_is_chained_by_its_model_data(store):
    uri = "s3://bucket/elsewhere/output/model.tar.gz"
    record = store.create(name="attached", task="attached", backend="sagemaker", info={"model_uri": uri})
    store.update(record.id, status=JobStatus("succeeded"))
    chained = chains.resolve(load_spec({"task": "causal-lm", "model": f"job:{record.id}", **SAGEMAKER}), store)
    assert chained.spec.model == uri and chained.sizing.model == uri  # its shape is unknown: the planner says so


def test_qlora_from_an_adapter_job_is_refused_before_anything_bills(store):
    remote = ended_job(store, "succeeded", backend="sagemaker", info={"model_uri": "s3://b/m/output/model.tar.gz"})
    adapter_spec = load_spec({"task": "causal-lm", "adapter": {"r": 4}})
    (store.job_dir(remote.id) / "spec.json").write_text(adapter_spec.model_dump_json())
    qlora = {"task": "causal-lm", "model": f"job:{remote.id}", "adapter": {"type": "qlora"}, **SAGEMAKER}
    qlora["hardware"] = {**SAGEMAKER["hardware"], "accelerator": "cuda"}
    with pytest.raises(LaunchError, match=f"is job {remote.id}'s adapter, merged into its base at load; merge it"):
        chains.resolve(load_spec(qlora), store)


def test_the_form_previews_a_chained_spec_as_it_would_launch(store, home):
    from nbtoolkit.inputs.bundled import tiny_config_fields
    from nbtoolkit.notebook.preview import preview

    local = ended_job(store, "succeeded")
    config = json.dumps(tiny_config_fields("nbtoolkit/tiny-gpt2"))
    (store.job_dir(local.id) / "output" / "model" / "config.json").write_text(config)
    shown = preview(load_spec({"task": "causal-lm", "model": "job:sft"}))
    assert shown.launch is not None and shown.launch_error is None
    assert str(store.job_dir(local.id) / "output" / "model") in shown.files["spec.json"]


def test_the_container_refuses_a_model_archive_that_writes_outside_its_channel(tmp_path):
    """The entry script unpacks the `model` channel itself: a link or a path out of the folder is one sentence."""
    import io
    import subprocess
    import sys
    import tarfile

    from nbtoolkit.backends.sagemaker.container import ENTRY_SOURCE

    channel = tmp_path / "channel"
    channel.mkdir()
    with tarfile.open(channel / "model.tar.gz", "w:gz") as tar:
        member = tarfile.TarInfo("../escaped.txt")
        member.size = 3
        tar.addfile(member, io.BytesIO(b"bad"))
    entry = tmp_path / "entry.py"
    entry.write_text(ENTRY_SOURCE)
    done = subprocess.run(
        [sys.executable, str(entry)], env={"SM_CHANNEL_MODEL": str(channel)}, capture_output=True, text=True
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == (
        "[nbtoolkit] error: the earlier job's model in input channel 'model' did not unpack: it holds a link or a "
        "path outside the model folder"
    )
    assert not (tmp_path / "escaped.txt").exists()


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
    assert not list(artifact.folder.parent.glob(".model-*"))  # no scratch folder left behind

    def whole(uri, folder, *, region=None):
        (folder / "config.json").write_text("{}")

    monkeypatch.setattr(sagemaker_render, "fetch_model", whole)
    assert fetch(artifact) == artifact.folder and artifact.here
    assert (artifact.folder / FETCHED_FROM).is_file()
    monkeypatch.setattr(sagemaker_render, "fetch_model", cut_short)
    assert fetch(artifact) == artifact.folder  # fetched once: not again


def test_parallel_fetches_download_once_and_never_replace_the_folder_one_returned(store, monkeypatch):
    import threading
    import time

    remote = ended_job(store, "succeeded", backend="sagemaker", info={"model_uri": "s3://bucket/m/output/model.tar.gz"})
    artifact = model_artifact(store, remote)
    downloads = []

    def slow(uri, folder, *, region=None):
        downloads.append(uri)
        time.sleep(0.5)
        (folder / "config.json").write_text("{}")

    monkeypatch.setattr(sagemaker_render, "fetch_model", slow)
    folders, inodes = [], []

    def fetch_and_look():
        folders.append(fetch(artifact))
        inodes.append((artifact.folder / "config.json").stat().st_ino)

    threads = [threading.Thread(target=fetch_and_look) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert downloads == [artifact.uri] and folders == [artifact.folder] * 3 and len(set(inodes)) == 1


def test_an_etag_is_an_md5_only_for_an_object_s3_did_not_encrypt_with_kms_or_a_customer_key():
    from nbtoolkit.backends.sagemaker.model_data import etag_is_md5

    assert etag_is_md5({}) and etag_is_md5({"ServerSideEncryption": "AES256"})
    assert not etag_is_md5({"ServerSideEncryption": "aws:kms"})
    assert not etag_is_md5({"SSECustomerAlgorithm": "AES256"})


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


@pytest.mark.parametrize(("status", "fix"), [("running", "wait for it to succeed"), ("stopped", "train it again")])
def test_a_reward_model_job_that_has_not_succeeded_is_refused_naming_the_field_and_the_fix(store, status, fix):
    record = store.create(name="rm", task="reward-model", backend="local")
    store.update(record.id, status=JobStatus(status))
    (store.job_dir(record.id) / "spec.json").write_text(load_spec({"task": "reward-model"}).model_dump_json())
    with pytest.raises(LaunchError) as caught:
        plan({"task": "grpo", "reward": {"models": ["job:rm"]}}, store=store)
    assert str(caught.value).startswith(
        f"reward.models 'job:rm': job {record.id} is {status}, and only a succeeded job has a final model to score "
        f"with; {fix}"
    )
    assert str(caught.value).endswith("or name a succeeded reward-model job (`nbtoolkit jobs` lists them)")
