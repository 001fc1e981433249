"""SageMaker jobs against the local AWS stand-in (moto + nbtoolkit/backends/sagemaker/standin.py): the real SDK v3
sends each CreateTrainingJob request; jobs are stopped, interrupted and attached. The full lifecycle of a
spot job (log lines -> metrics -> interruption -> resume -> completed, cost) is the example notebook's,
tested in test_notebook_sagemaker.py."""

from __future__ import annotations

import hashlib
import json
import runpy
import subprocess
import time

import pytest

from nbtoolkit.api import Job, attach, launch
from nbtoolkit.backends.dispatch import render
from nbtoolkit.backends.sagemaker.job import JOB_FILE, TrainingJob, training_job
from nbtoolkit.backends.sagemaker.standin import BUCKET, ROLE, TELEMETRY_OPT_OUT
from nbtoolkit.backends.sagemaker.submit import submit
from nbtoolkit.spec import load_spec
from tests.conftest import PYTHON, SCRIPTS
from tests.sagemaker_standin import (  # noqa: F401 (fixtures)
    sdk_config_validation_against_a_schema_checked_once,
    standin,
    standin_server,
)
from tests.test_jobs import wait_for

# the SDK's own modules still import its moved configs module
pytestmark = pytest.mark.filterwarnings("ignore:sagemaker.train.configs has been moved:DeprecationWarning")

UNIQUE = iter(range(1000))


def spec_for(name: str, **changes) -> dict:
    spec = {
        "name": f"{name}-{next(UNIQUE)}",
        "task": "text-classification",
        "hardware": {"target": "sagemaker", "instance_type": "ml.g5.2xlarge"},
        "sagemaker": {"role": ROLE, "region": "us-east-1", "bucket": BUCKET},
    }
    for key, value in changes.items():
        spec[key] = {**spec.get(key, {}), **value} if isinstance(value, dict) else value
    return spec


def user_script(tmp_path, body: str = "print('hello')\n"):
    source = tmp_path / "src"
    source.mkdir(exist_ok=True)
    (source / "train.py").write_text(body)
    return {"path": str(source / "train.py"), "args": ["--learning_rate", "3e-5", "--do_train"]}


def test_the_stand_in_tests_sdk_config_check_takes_and_refuses_what_the_sdks_own_does():
    """The fixture's faster check (its schema checked once) is still the SDK's check of the config."""
    import jsonschema
    import yaml
    from sagemaker.core.config.config_schema import SAGEMAKER_PYTHON_SDK_CONFIG_SCHEMA

    validate = sdk_config_validation_against_a_schema_checked_once()
    validate(yaml.safe_load(TELEMETRY_OPT_OUT))
    wrong = yaml.safe_load(TELEMETRY_OPT_OUT.replace("true", "'yes'"))
    with pytest.raises(jsonschema.ValidationError) as ours:
        validate(wrong)
    with pytest.raises(jsonschema.ValidationError) as sdks:
        jsonschema.validate(wrong, SAGEMAKER_PYTHON_SDK_CONFIG_SCHEMA)
    assert ours.value.message == sdks.value.message == "'yes' is not of type 'boolean'"


# -- the CreateTrainingJob request, as the SDK sends it -------------------------------------------

DISTRIBUTIONS = [
    ("none", {"instance_type": "ml.g5.2xlarge"}, {}, None),
    ("ddp", {"instance_type": "ml.g5.12xlarge", "nodes": 2}, {}, {"process_count_per_node": 4, "smp": None}),
    (
        "smddp",
        {"instance_type": "ml.p4d.24xlarge", "nodes": 2},
        {"transformers_version": "4.36.0", "pytorch_version": "2.1.0", "py_version": "py310"},
        {"process_count_per_node": 8, "smp": None},
    ),
    (
        "smp",
        {"instance_type": "ml.p4d.24xlarge", "devices": 8},
        {},
        {"process_count_per_node": 8, "smp": {"tensor_parallel_degree": 4}},
    ),
    (
        "xla",
        {"instance_type": "ml.trn1.32xlarge", "accelerator": "neuron", "devices": 32},
        {},
        {"process_count_per_node": 32, "smp": None},
    ),
]


def test_create_training_job_request_for_each_distribution(standin, tmp_path):
    standin.run_containers = False
    for strategy, hardware, sagemaker, torchrun in DISTRIBUTIONS:
        parallelism = {"strategy": strategy, **({"tensor_parallel_degree": 4} if strategy == "smp" else {})}
        body = "import torch.sagemaker as tsm\n\ntsm.init()\n" if strategy == "smp" else "print('hello')\n"
        spec = load_spec(
            spec_for(
                f"dist-{strategy}",
                hardware=hardware,
                sagemaker=sagemaker,
                parallelism=parallelism,
                script=user_script(tmp_path, body),
            )
        )
        name, region = submit(training_job(spec), tmp_path)
        request = standin.requests[name]
        assert region == "us-east-1" and request["RoleArn"] == ROLE
        assert request["ResourceConfig"] == {
            "InstanceType": hardware["instance_type"],
            "InstanceCount": hardware.get("nodes", 1),
            "VolumeSizeInGB": 100,
        }
        assert request["HyperParameters"].items() >= {"learning_rate": "3e-5", "do_train": "true"}.items()
        drivers = next(item for item in request["InputDataConfig"] if item["ChannelName"] == "sm_drivers")
        uri = drivers["DataSource"]["S3DataSource"]["S3Uri"].removeprefix(f"s3://{BUCKET}/")
        distributed = json.loads(standin.s3.get_object(Bucket=BUCKET, Key=f"{uri}/distributed.json")["Body"].read())
        source = json.loads(standin.s3.get_object(Bucket=BUCKET, Key=f"{uri}/sourcecode.json")["Body"].read())
        assert source["entry_script"] == "train.py"
        if distributed.get("smp"):
            distributed["smp"] = {key: value for key, value in distributed["smp"].items() if value is not None}
        assert (distributed or None) == torchrun, strategy
        image = request["AlgorithmSpecification"]["TrainingImage"]
        environment = request["Environment"]
        if strategy == "smddp":
            assert image.endswith("huggingface-pytorch-training:2.1.0-transformers4.36.0-gpu-py310-cu121-ubuntu20.04")
            assert environment["ACCELERATE_SAGEMAKER_DISTRIBUTED_TYPE"] == "DATA_PARALLEL"
        elif strategy == "smp":
            assert "/smdistributed-modelparallel:" in image
            assert json.loads(request["HyperParameters"]["mp_parameters"]) == {"tensor_parallel_degree": 4}
        elif strategy == "xla":
            assert image.startswith(
                "763104351884.dkr.ecr.us-east-1.amazonaws.com/huggingface-pytorch-training-neuronx:"
            )
            cache = f"--cache_dir=s3://{BUCKET}/{spec.display_name}/neuron-cache"
            assert environment["NEURON_CC_FLAGS"] == cache and "RUN_NEURON_PARALLEL_COMPILE" not in environment
            precompile, _ = submit(training_job(spec).for_phase("precompile"), tmp_path)
            assert precompile.startswith(f"{spec.display_name}-precompile-")
            assert (
                standin.requests[precompile]["Environment"].items()
                >= {"RUN_NEURON_PARALLEL_COMPILE": "1", "NEURON_CC_FLAGS": cache}.items()
            )
        else:
            assert image.endswith("huggingface-pytorch-training:2.9.0-transformers5.3.0-gpu-py312-cu130-ubuntu22.04")
        assert "ACCELERATE_USE_SAGEMAKER" not in environment or strategy == "smddp"
        assert "EnableManagedSpotTraining" not in request and "CheckpointConfig" not in request
        names = [item["Name"] for item in request["AlgorithmSpecification"]["MetricDefinitions"]]
        assert names[:3] == ["loss", "learning_rate", "grad_norm"]


def test_spot_with_checkpoints_and_the_exported_v3_script_send_the_same_request(standin, tmp_path, monkeypatch):
    standin.run_containers = False
    spec = load_spec(
        spec_for("spot", train={"save_steps": 10}, sagemaker={"spot": True, "max_run": 3600, "max_wait": 5400})
    )
    launch_files = render(spec).files
    job_dir = tmp_path / "job"
    for name, text in launch_files.items():
        (job_dir / name).parent.mkdir(parents=True, exist_ok=True)
        (job_dir / name).write_text(text)
    submitted = time.time()
    ours, _ = submit(training_job(spec), job_dir)
    request = standin.requests[ours]
    # the budget in the container counts from the submit, as billing does, not from the program's own start
    assert submitted <= float(request["Environment"].pop("NBTOOLKIT_BILLED_SINCE")) <= time.time()
    assert request["EnableManagedSpotTraining"] is True
    assert request["StoppingCondition"] == {"MaxRuntimeInSeconds": 3600, "MaxWaitTimeInSeconds": 5400}
    assert request["CheckpointConfig"] == {
        "S3Uri": f"s3://{BUCKET}/{spec.display_name}/{ours}/checkpoints",
        "LocalPath": "/opt/ml/checkpoints",
    }
    assert request["Environment"]["NBTOOLKIT_CHECKPOINT_DIR"] == "/opt/ml/checkpoints"
    # the exported script, run as a user would, makes the same request (names and upload paths aside)
    before = set(standin.requests)
    time.sleep(1.1)  # job names carry a timestamp to the second
    monkeypatch.setattr("sys.argv", ["launch_v3.py"])
    runpy.run_path(str(job_dir / "sagemaker" / "launch_v3.py"), run_name="__main__")
    exported = standin.requests[(set(standin.requests) - before).pop()]

    def comparable(sent):
        text = json.dumps(sent, sort_keys=True)
        return json.loads(text.replace(sent["TrainingJobName"], "NAME"))

    assert comparable(exported) == comparable(request)


# -- jobs: submit -> in progress -> log lines -> metrics -> completed / stopped ----------------


def test_a_running_jobs_cost_grows_from_billable_time_and_stop_ends_it_after_a_spot_interruption(standin, store):
    """One stand-in job (the sleepy script, spot, a price) serves both: its cost so far and projected total while it
    runs, then an interruption it cannot resume from, then a stop that records its billable time."""
    from nbtoolkit.runner.listing import listing_row, projected_cost_usd

    script = {"path": str(SCRIPTS / "sleepy.py"), "source_dir": str(SCRIPTS)}
    # $360 an instance-hour: 10 cents a billed second, so a few seconds show in cents
    spec = spec_for("cost-stop", script=script, hardware={"hourly_price_usd": 360.0}, sagemaker={"spot": True})
    job = launch(spec, store=store)
    wait_for(lambda: (job.record.info.get("cost_usd") or 0) > 0, timeout=180)
    first = job.record
    wait_for(lambda: job.record.info["cost_usd"] >= first.info["cost_usd"] + 0.2, timeout=60)
    later = job.record
    assert later.status == "running" and later.info["cost_estimated"]  # billable time so far, while it trains
    # the cost is the price x the seconds SageMaker bills: it grew with the billed time between the two looks
    grown_seconds = later.info["billable_seconds"] - first.info["billable_seconds"]
    assert later.info["cost_usd"] - first.info["cost_usd"] == pytest.approx(360.0 * grown_seconds / 3600, abs=0.01)
    row = listing_row(later)
    assert row["cost"] == f"${later.info['cost_usd']:,.2f}"
    wait_for(lambda: projected_cost_usd(job.record) is not None, timeout=60)  # once a steady pace is measured
    now = job.record
    assert projected_cost_usd(now) > now.info["cost_usd"] and listing_row(now)["projected"].startswith("$")

    wait_for(lambda: [m for m in job.records() if m["kind"] == "train"], timeout=180)
    name = job.record.remote_name
    # spot interrupted without checkpoints of its own: the job says so, and keeps going
    standin.interrupt(name)
    wait_for(lambda: "no checkpoints to resume from" in (job.record.message or ""), timeout=60)
    assert job.stop() == "stopped"
    assert name in standin.stop_requests and standin.job(name).training_job_status == "Stopped"
    record = job.record
    assert record.info["status"] == "Stopped" and record.info["billable_seconds"] >= 1
    assert record.message == "stopped on request"
    assert "waiting until SageMaker reports it Stopped" in job.logs()


def test_attach_follows_an_existing_job_and_it_lists_beside_local_jobs(standin, store, tmp_path, home):
    standin.run_containers = False
    spec = load_spec(spec_for("attached", script=user_script(tmp_path)))
    name, _ = submit(training_job(spec), tmp_path)
    attached = attach(name, store=store)
    wait_for(lambda: attached.record.info.get("secondary_status") == "Training", timeout=120)
    local = launch({"task": "text-classification", "script": {"path": str(tmp_path / "src" / "train.py")}}, store=store)
    assert local.wait(timeout=120) == "succeeded"
    listed = subprocess.run(
        [PYTHON, "-m", "nbtoolkit.cli", "jobs", "--json"], capture_output=True, text=True, check=True, timeout=60
    )
    rows = {row["id"]: row for row in json.loads(listed.stdout)}
    assert rows[attached.id]["backend"] == "sagemaker" and rows[attached.id]["status"] == "running"
    assert rows[attached.id]["name"] == name and rows[local.id]["backend"] == "local"
    assert attached.stop() == "stopped" and standin.job(name).training_job_status == "Stopped"
    assert Job(attached.id, store).record.info["remote_name"] == name


def test_a_sagemaker_job_stopped_at_its_budget_ends_stopped_saying_why(standin, store):
    """The program's metrics.jsonl stays in the container: its budget line, relayed in the log, says it stopped."""
    spec = spec_for(
        "budget",
        hardware={"hourly_price_usd": 36.0},
        train={"max_steps": 100000, "logging_steps": 5, "budget_usd": 0.04},
    )
    job = launch(spec, store=store)
    assert job.wait(timeout=300) == "stopped", job.logs(tail=30)
    (stop,) = [record for record in job.records() if record.get("reached") == "stopped"]
    assert stop["budget_usd"] == 0.04 and stop["cost_usd"] >= 0.04
    # counted from the submit, as billed: the container start-up alone outlasts the 4 s it buys, so step 1 stops it
    assert stop["step"] == 1
    billed = job.record.info["cost_usd"]  # the job's one cost: SageMaker's billable seconds
    assert job.record.message.startswith(f"stopped at its budget: ${billed:.2f} of the $0.04 budget spent")
    assert job.record.info["budget"]["reached"] == "stopped" and job.record.info["status"] == "Completed"


def test_a_sagemaker_job_starts_from_an_earlier_ones_model_data_and_its_own_comes_back(standin, store):
    """SFT then the next step, both on SageMaker: the second reads the first's model.tar.gz as its `model` input
    channel (never a folder of this machine), merges its adapter as it loads, and its own model comes back here."""
    from tests.test_adapters import STANDING_STILL, assert_same_weights, saved_weights

    steps = {"max_steps": 2, "batch_size": 4, "logging_steps": 1}
    parent = launch(spec_for("chain-sft", task="causal-lm", adapter={"r": 4}, train=steps), store=store)
    assert parent.wait(timeout=300) == "succeeded", parent.logs(tail=30)
    uri = parent.model(download=False)
    assert uri == standin.job(parent.record.remote_name).model_artifacts["S3ModelArtifacts"]
    assert uri.startswith(f"s3://{BUCKET}/") and uri.endswith("/output/model.tar.gz")
    child = launch(
        spec_for("chain-next", task="causal-lm", model=f"job:{parent.id}", train=STANDING_STILL), store=store
    )
    assert child.wait(timeout=300) == "succeeded", child.logs(tail=30)
    request = standin.requests[child.record.remote_name]
    channels = {item["ChannelName"]: item["DataSource"]["S3DataSource"]["S3Uri"] for item in request["InputDataConfig"]}
    assert channels["model"] == uri and child.spec.model == uri
    assert "model" not in {
        item["ChannelName"] for item in standin.requests[parent.record.remote_name]["InputDataConfig"]
    }
    folder = child.model()  # downloaded, checked, unpacked into the job's output/model
    assert folder == child.dir / "output" / "model"
    assert_same_weights(saved_weights(folder), saved_weights(parent.merge()))  # the parent's model came back too
    assert set(child.predict("The river")) == {"continuation"}
    stamp = (folder / "model.safetensors").stat().st_mtime_ns
    assert child.model() == folder and (folder / "model.safetensors").stat().st_mtime_ns == stamp  # fetched once


def test_local_data_files_reach_the_job_as_input_channels_uploaded_once(standin, store, tmp_path, monkeypatch):
    """dataset.files on this machine go to the job's bucket under their content's hash (said by plan first), the
    job trains on them from its channels, and a second launch of the same files uploads nothing."""
    from nbtoolkit.api import plan

    rows = [{"text": f"row {index} of my own data", "label": ["calm", "angry"][index % 2]} for index in range(6)]
    train, validation = tmp_path / "mine.jsonl", tmp_path / "held-out.jsonl"
    train.write_text("".join(json.dumps(row) + "\n" for row in rows))
    validation.write_text("".join(json.dumps(row) + "\n" for row in rows[:2]))
    files = {"train": str(train), "validation": str(validation)}
    spec = spec_for("own-data", dataset={"files": files}, train={"epochs": 1, "batch_size": 2, "logging_steps": 1})
    said = plan(spec, store=store).summary_lines()
    sha = hashlib.sha256(train.read_bytes()).hexdigest()
    channel = f"s3://{BUCKET}/nbtoolkit/data/{sha}-jsonl/"
    assert f"before the job starts: dataset.files.train: {train} (" in "\n".join(said)
    assert f"uploaded to {channel}data.jsonl" in "\n".join(said)
    assert "Contents" not in standin.s3.list_objects_v2(
        Bucket=BUCKET, Prefix=f"nbtoolkit/data/{sha}"
    )  # plan sent nothing

    job = launch(spec, store=store)
    assert job.wait(timeout=300) == "succeeded", job.logs(tail=30)
    request = standin.requests[job.record.remote_name]
    channels = {item["ChannelName"]: item["DataSource"]["S3DataSource"]["S3Uri"] for item in request["InputDataConfig"]}
    assert channels["data-train"] == channel and channels["data-validation"].endswith("-jsonl/")
    stored = standin.s3.get_object(Bucket=BUCKET, Key=f"nbtoolkit/data/{sha}-jsonl/data.jsonl")
    assert stored["Body"].read() == train.read_bytes()
    assert f"{train}: uploaded to {channel}data.jsonl" in job.logs()
    assert job.metrics()["step"].max() == 3  # 6 rows of the user's file at batch 2, not the bundled sample data
    shipped = json.loads((job.dir / "sagemaker" / "code" / "spec.json").read_text())
    assert shipped["dataset"]["files"] == {"train": "data-train/data.jsonl", "validation": "data-validation/data.jsonl"}

    standin.run_containers = False
    again: list[str] = []
    modified = stored["LastModified"]
    same = TrainingJob.model_validate_json((job.dir / JOB_FILE).read_text())  # what the follower submits
    name, _ = submit(same, job.dir, again.append)
    assert again == [f"{path}: already in {uri}, not uploaded again" for uri, path in same.uploads.items()]
    assert (
        standin.s3.head_object(Bucket=BUCKET, Key=f"nbtoolkit/data/{sha}-jsonl/data.jsonl")["LastModified"] == modified
    )
    assert {item["ChannelName"] for item in standin.requests[name]["InputDataConfig"]} >= {
        "data-train",
        "data-validation",
    }
    # the exported script, run by hand, finds the files there too and sends the same channels
    before = set(standin.requests)
    time.sleep(1.1)  # job names carry a timestamp to the second
    monkeypatch.setattr("sys.argv", ["launch_v3.py"])
    runpy.run_path(str(job.dir / "sagemaker" / "launch_v3.py"), run_name="__main__")
    exported = standin.requests[(set(standin.requests) - before).pop()]
    sent = {item["ChannelName"]: item["DataSource"]["S3DataSource"]["S3Uri"] for item in exported["InputDataConfig"]}
    assert {name: sent[name] for name in ("data-train", "data-validation")} == {
        name: channels[name] for name in ("data-train", "data-validation")
    }
    assert (
        standin.s3.head_object(Bucket=BUCKET, Key=f"nbtoolkit/data/{sha}-jsonl/data.jsonl")["LastModified"] == modified
    )


def test_an_upload_sends_only_the_content_its_key_names(standin, tmp_path):
    """A file edited between the launch (which hashed it) and the upload is refused and leaves nothing in S3; an
    object that does not record its hash (written by anything else) is uploaded again, not trusted."""
    from nbtoolkit.backends.sagemaker.data_channels import DataChanged, data_channels, upload

    mine = tmp_path / "rows.jsonl"
    mine.write_text('{"text": "v1", "label": "calm"}\n')
    uri = data_channels({"train": str(mine)}, BUCKET).objects["train"]
    key = uri.removeprefix(f"s3://{BUCKET}/")
    mine.write_text('{"text": "v2, edited after the launch read v1", "label": "calm"}\n')
    with pytest.raises(DataChanged, match=r"changed after the launch read it .*launch again"):
        upload({uri: str(mine)}, standin.s3, say=lambda _: None)
    assert "Contents" not in standin.s3.list_objects_v2(Bucket=BUCKET, Prefix=key)
    mine.write_text('{"text": "v1", "label": "calm"}\n')
    standin.s3.put_object(Bucket=BUCKET, Key=key, Body=b"someone else's bytes")  # no recorded hash
    said: list[str] = []
    upload({uri: str(mine)}, standin.s3, say=said.append)
    assert said == [f"{mine}: uploaded to {uri}"]
    assert standin.s3.get_object(Bucket=BUCKET, Key=key)["Body"].read() == mine.read_bytes()
