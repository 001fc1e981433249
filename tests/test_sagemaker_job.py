"""The SageMaker backend without AWS: the job a spec becomes, its rules and sentences, its export,
the metric definitions (the log parser's own pattern), costs, and what is checked before submitting."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from types import SimpleNamespace

import botocore.loaders
import botocore.regions
import pytest
from packaging.requirements import Requirement

from nbtoolkit.backends import LaunchError, backend_name
from nbtoolkit.backends.dispatch import preflight, render
from nbtoolkit.backends.sagemaker.export import _image_lines
from nbtoolkit.backends.sagemaker.follow import cost_facts, not_resumable_message
from nbtoolkit.backends.sagemaker.images import DEFAULT_VERSIONS
from nbtoolkit.backends.sagemaker.job import (
    CODE_DIR,
    ENTRY_SCRIPT,
    JOB_FILE,
    SMDDP_ENV,
    TrainingJob,
    script_hyperparameters,
    training_job,
)
from nbtoolkit.backends.sagemaker.submit import SubmitError, image_uri
from nbtoolkit.metrics.parse import LogParser
from nbtoolkit.spec import SpecError, SpecWarning, load_spec
from tests.conftest import DATA, PYTHON

ROLE = "arn:aws:iam::111122223333:role/sagemaker"
#: SageMaker's distributed libraries need a script written for them, as the seed's run_qa.py
SCRIPT = {"path": "/work/src/run_qa.py", "args": ["--do_train"]}


def sagemaker_spec(**changes):
    spec = {
        "name": "bert-qa",
        "task": "question-answering",
        "hardware": {"target": "sagemaker", "instance_type": "ml.p4d.24xlarge"},
        "sagemaker": {"role": ROLE, "region": "us-east-1"},
    }
    for key, value in changes.items():
        spec[key] = {**spec.get(key, {}), **value} if isinstance(value, dict) else value
    return load_spec(spec)


def test_a_sagemaker_target_renders_a_follower_stage_and_the_job_files():
    spec = sagemaker_spec(train={"save_steps": 20}, sagemaker={"spot": True, "max_run": 3600})
    assert backend_name(spec) == "sagemaker"
    launch = render(spec)
    assert launch.backend == "sagemaker" and [stage.name for stage in launch.stages] == ["train"]
    stage = launch.stages[0]
    assert stage.argv[1:] == ["-m", "nbtoolkit.backends.sagemaker.follow", "--job", JOB_FILE]
    assert stage.metrics_from_log and stage.stop_grace_s >= 120  # SageMaker gives a container 120 s to stop
    assert set(launch.files) == {
        "spec.json",
        JOB_FILE,
        f"{CODE_DIR}/spec.json",
        f"{CODE_DIR}/{ENTRY_SCRIPT}",
        f"{CODE_DIR}/requirements.txt",
        "sagemaker/launch_v3.py",
        "sagemaker/launch_v2.py",
    }
    job = TrainingJob.model_validate_json(launch.files[JOB_FILE])
    assert (job.instance_type, job.instance_count, job.spot, job.max_run, job.max_wait) == (
        "ml.p4d.24xlarge",
        1,
        True,
        3600,
        7200,
    )
    assert job.checkpoints and job.hourly_price_usd == 37.688
    assert not any("restarts from step 0" in note for note in launch.notes)
    assert job.image_lookup == {
        "framework": "huggingface",
        "version": DEFAULT_VERSIONS["transformers_version"],
        "base_framework_version": f"pytorch{DEFAULT_VERSIONS['pytorch_version']}",
        "py_version": DEFAULT_VERSIONS["py_version"],
        "image_scope": "training",
        "instance_type": "ml.p4d.24xlarge",
    }
    # the container trains on the instance's GPUs and resumes from its checkpoints
    shipped = load_spec(launch.files[f"{CODE_DIR}/spec.json"])
    assert shipped.hardware.accelerator == "cuda" and shipped.resume == "latest"
    assert load_spec(launch.files["spec.json"]) == spec
    assert not any(secret in text for text in launch.files.values() for secret in ("AWS_SECRET", "aws_secret"))


@pytest.mark.parametrize(
    "parallelism, instance, nodes, expected",
    [
        ({"strategy": "none"}, "ml.g5.2xlarge", 1, (False, None, None, {})),
        ({"strategy": "ddp"}, "ml.g5.12xlarge", 2, (True, 4, None, {})),
        ({"strategy": "smddp"}, "ml.p4d.24xlarge", 2, (True, 8, None, SMDDP_ENV)),
        (
            {"strategy": "smp", "tensor_parallel_degree": 4},
            "ml.p4d.24xlarge",
            1,
            (True, 8, {"tensor_parallel_degree": 4}, {}),
        ),
    ],
)
def test_distribution_per_strategy(parallelism, instance, nodes, expected):
    sagemaker = (
        {"transformers_version": "4.36.0", "pytorch_version": "2.1.0", "py_version": "py310"}
        if parallelism["strategy"] == "smddp"
        else {}
    )
    script = SCRIPT if parallelism["strategy"] in ("smddp", "smp") else None
    job = training_job(
        sagemaker_spec(
            parallelism=parallelism,
            hardware={"instance_type": instance, "nodes": nodes},
            sagemaker=sagemaker,
            script=script,
        )
    )
    distributed, per_node, smp, env = expected
    assert (job.distributed, job.processes_per_node, job.smp) == (distributed, per_node, smp)
    assert env.items() <= job.environment.items()
    assert job.instance_count == nodes


def test_a_trainium_adapters_requirements_keep_every_version_the_neuron_stack_pins():
    """optimum-neuron 0.4.1 pins PEFT 0.17.0 (below the GPU floor's 0.17.1): requirements.txt names PEFT, but no line
    of it may move a version the image's table pins (tests/images trains the adapter with the image's own)."""
    spec = sagemaker_spec(
        task="text-classification",
        hardware={"instance_type": "ml.trn1.2xlarge", "accelerator": "neuron"},
        adapter={"r": 8},
    )
    lines = [Requirement(line) for line in render(spec).files[f"{CODE_DIR}/requirements.txt"].split()]
    table = json.loads((Path(__file__).parent / "facts" / "images" / "hf-neuronx-sdk2.26.json").read_text())
    pins = [Requirement(package) for package in table["packages"] if "==" in package]
    assert "peft" in {line.name for line in lines} and "peft" in {pin.name for pin in pins}
    for pin in pins:
        (version,) = (item.version for item in pin.specifier)
        assert all(line.specifier.contains(version) for line in lines if line.name == pin.name), (pin, lines)


def test_submit_and_the_exported_scripts_pull_the_trainium_image_from_the_registry_of_the_jobs_region():
    """The account (and, in China, the domain) differ by region, as the SDK's huggingface-neuronx.json lists them;
    a region it lists none for is refused before anything bills."""
    trainium = {
        "task": "text-classification",
        "hardware": {"instance_type": "ml.trn1.2xlarge", "accelerator": "neuron"},
    }
    job = training_job(sagemaker_spec(**trainium, sagemaker={"region": None}))
    exported = "\n".join(_image_lines(job, "image_uris.retrieve"))
    tag = "huggingface-pytorch-training-neuronx:2.8.0-transformers4.55.4-neuronx-py310-sdk2.26.0-ubuntu22.04"
    for region, registry in [
        ("cn-north-1", "727897471807.dkr.ecr.cn-north-1.amazonaws.com.cn"),
        ("ap-south-2", "772153158452.dkr.ecr.ap-south-2.amazonaws.com"),
        ("us-west-2", "763104351884.dkr.ecr.us-west-2.amazonaws.com"),
    ]:
        script: dict = {"boto_session": SimpleNamespace(region_name=region)}
        exec(exported, script)
        assert script["training_image"] == image_uri(job, region) == f"{registry}/{tag}"
    refused = "no registry of the Trainium training image in region 'eu-north-1' .*us-east-1.*"
    with pytest.raises(SystemExit, match=refused):
        exec(exported, {"boto_session": SimpleNamespace(region_name="eu-north-1")})
    with pytest.raises(SubmitError, match=refused):
        image_uri(job, "eu-north-1")
    with pytest.raises(SpecError, match=refused):
        training_job(sagemaker_spec(**trainium, sagemaker={"region": "eu-north-1"}))
    # the ECR domain of each region is the one botocore's endpoint data gives, as the SDK asks it
    # (sagemaker/core/image_uris.py:226-229)
    endpoints = botocore.regions.EndpointResolver(botocore.loaders.create_loader().load_data("endpoints"))
    for region, host in job.image_registries.items():
        assert host.split(".dkr.")[1] == endpoints.construct_endpoint("ecr", region)["hostname"], region


def test_a_trainium_jobs_own_image_must_hold_the_neuron_stack_it_was_tested_with():
    """A GPU or CPU image on trn1 would train on the host's CPU while the chips bill; an older Neuron SDK's
    optimum-neuron takes a trainer path nothing rehearses: each refused in one sentence before anything starts."""
    ecr = "763104351884.dkr.ecr.{region}.amazonaws.com"

    def trainium_with(image: str):
        hardware = {"instance_type": "ml.trn1.2xlarge", "accelerator": "neuron"}
        return training_job(
            sagemaker_spec(task="text-classification", hardware=hardware, sagemaker={"image_uri": image})
        )

    for image in (
        f"{ecr}/huggingface-pytorch-training:2.9.0-transformers5.3.0-gpu-py312-cu130-ubuntu22.04",
        f"{ecr}/huggingface-pytorch-training:2.8.0-transformers4.56.2-cpu-py312-ubuntu22.04",
    ):
        with pytest.raises(SpecError, match=r"is no Neuron image .* train on the host's CPU while the Trainium chips"):
            trainium_with(image)
    older = f"{ecr}/huggingface-pytorch-training-neuronx:2.1.2-transformers4.48.1-neuronx-py310-sdk2.20.0-ubuntu20.04"
    with pytest.raises(SpecError, match=r"holds Neuron SDK 2.20, older than the 2.26 nbtoolkit's program is tested"):
        trainium_with(older)
    with pytest.warns(SpecWarning, match=r"names no Neuron SDK in its tag"):
        trainium_with(f"{ecr}/my-neuronx-training:latest")
    newer = f"{ecr}/huggingface-pytorch-training-neuronx:2.9.0-transformers4.57.1-neuronx-py310-sdk2.27.0-ubuntu22.04"
    assert trainium_with(newer).image_uri == newer


def test_trainium_uses_the_documented_image_and_a_precompile_job_sharing_the_cache_on_s3():
    spec = sagemaker_spec(
        task="text-classification",
        precision="bf16",
        hardware={"instance_type": "ml.trn1.2xlarge", "accelerator": "neuron"},
    )
    job = training_job(spec)
    assert job.distributed and job.processes_per_node == 2 and job.precompile  # one worker per NeuronCore
    published = json.loads((Path(__file__).parent / "facts" / "hf-neuronx-training-images.json").read_text())
    newest = published["rows"][0]  # the image of Neuron SDK 2.26, whose optimum-neuron 0.4.1 the program is held to
    assert newest["neuron_sdk"] == "2.26.0"
    assert image_uri(job, "us-east-1") == newest["uri"].replace("<region>", "us-east-1")
    assert job.environment["NEURON_CC_FLAGS"] == "--cache_dir={neuron_cache}"
    assert job.environment["NEURON_RT_STOCHASTIC_ROUNDING_EN"] == "1"  # full bf16 on SDK 2.26 (XLA_USE_BF16 ended)
    precompile = job.for_phase("precompile")
    assert precompile.environment["RUN_NEURON_PARALLEL_COMPILE"] == "1" and precompile.metric_definitions == []
    assert precompile.environment["NBTOOLKIT_SPEC_FILE"] == "precompile.json"
    assert precompile.base_job_name == f"{job.base_job_name}-precompile"
    launch = render(spec)
    assert [(stage.name, stage.metrics_from_log) for stage in launch.stages] == [("precompile", False), ("train", True)]
    assert load_spec(launch.files[f"{CODE_DIR}/precompile.json"]).train.max_steps == spec.neuron.precompile_steps
    # its transformers 4.55.4 is below the GPU floor, and stays: optimum-neuron 0.4.1 holds it there
    requirements = launch.files[f"{CODE_DIR}/requirements.txt"]
    assert "4.55.4" in job.image_uri and not {"transformers", "datasets", "accelerate"} & {
        line.split(">=")[0] for line in requirements.splitlines()
    }
    assert [
        stage.name
        for stage in render(
            sagemaker_spec(
                task="text-classification",
                hardware={"instance_type": "ml.trn1.2xlarge", "accelerator": "neuron"},
                neuron={"precompile": False},
            )
        ).stages
    ] == ["train"]


@pytest.mark.parametrize(
    "changes, sentence",
    [
        (
            {"parallelism": {"strategy": "smddp"}, "hardware": {"instance_type": "ml.g5.12xlarge"}, "script": SCRIPT},
            "parallelism.strategy 'smddp' does not run on 'ml.g5.12xlarge'",
        ),
        (
            {"parallelism": {"strategy": "smddp"}, "script": SCRIPT},
            (
                "parallelism.strategy 'smddp' needs a Hugging Face image with PyTorch older than 2.2 "
                "(sagemaker.pytorch_version is '2.9.0')"
            ),
        ),
        (
            {"parallelism": {"strategy": "smddp"}},
            "parallelism.strategy 'smddp' with nbtoolkit's training program needs sagemaker.image_uri",
        ),
        (
            {"parallelism": {"strategy": "smp"}},
            "parallelism.strategy 'smp' needs a training script that calls torch.sagemaker.init()",
        ),
        (
            {"parallelism": {"strategy": "smp"}, "hardware": {"instance_type": "ml.g5.48xlarge"}, "script": SCRIPT},
            "parallelism.strategy 'smp' does not run on 'ml.g5.48xlarge'",
        ),
        (
            {"parallelism": {"strategy": "smp", "pipeline_parallel_degree": 4}, "script": SCRIPT},
            "parallelism.pipeline_parallel_degree 4 is not available",
        ),
        ({"hardware": {"instance_type": "ml.m5.xlarge"}}, "hardware.instance_type 'ml.m5.xlarge' has no GPU"),
        (
            {"hardware": {"instance_type": "ml.g5.2xlarge", "accelerator": "neuron"}},
            "hardware.accelerator 'neuron' does not match instance type 'ml.g5.2xlarge'",
        ),
        ({"sagemaker": {"environment": {"HF_TOKEN": "hf_x"}}}, "sagemaker.environment.HF_TOKEN looks like a secret"),
        (
            {"dataset": {"files": {"train": "/data/train.jsonl"}}},
            "dataset.files.train is a file on this machine, which a SageMaker job reads from S3; set sagemaker.bucket",
        ),
        (
            {"dataset": {"files": {"train": "/d/a.jsonl", "dev set": "/d/b.jsonl"}}, "sagemaker": {"bucket": "b"}},
            "dataset.files split 'dev set' cannot name a SageMaker input channel",
        ),
        (
            {"parallelism": {"strategy": "deepspeed", "zero_stage": 2}},
            "parallelism.strategy 'deepspeed' is not offered on SageMaker",
        ),
    ],
)
def test_what_sagemaker_cannot_run_is_one_sentence_as_the_spec_is_built(changes, sentence):
    """The SageMaker backend's rules run when the spec is built, so the form shows them, not only the Command tab."""
    with pytest.raises(SpecError) as raised:
        sagemaker_spec(**changes)
    message = str(raised.value)
    assert message.startswith(sentence) and "\n" not in message


def test_model_parallel_needs_a_script_that_starts_smp_v2(tmp_path):
    """run_glue.py never imports torch.sagemaker: under strategy smp it would train data-parallel."""
    glue, smp = tmp_path / "run_glue.py", tmp_path / "train_smp.py"
    glue.write_text("from transformers import Trainer\n# see torch.sagemaker docs\ntrainer = Trainer()\n")
    smp.write_text("import torch\nimport torch.sagemaker as tsm\n\ntsm.init()\n")
    with pytest.raises(
        SpecError,
        match=r"^parallelism.strategy 'smp' needs a script that initialises SageMaker "
        r"model parallel v2 .*, but run_glue.py never imports torch.sagemaker",
    ):
        sagemaker_spec(parallelism={"strategy": "smp"}, script={"path": str(glue)})
    assert training_job(sagemaker_spec(parallelism={"strategy": "smp"}, script={"path": str(smp)})).smp


def test_smddp_with_an_explicit_image_or_an_older_pytorch_is_accepted():
    for sagemaker, script in (
        ({"image_uri": "111.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.3.0-gpu"}, None),
        ({"transformers_version": "4.36.0", "pytorch_version": "2.1.0", "py_version": "py310"}, SCRIPT),
    ):
        job = training_job(sagemaker_spec(parallelism={"strategy": "smddp"}, sagemaker=sagemaker, script=script))
        assert job.distributed and SMDDP_ENV.items() <= job.environment.items()


def test_the_image_python_comes_from_the_sdks_own_image_table():
    """nbtoolkit's advice for smddp (transformers 4.36.0, PyTorch 2.1.0) without a py_version resolves to
    the only Python that image has, and the SDK's own lookup accepts what both exports ask for."""
    from sagemaker.core import image_uris

    spec = sagemaker_spec(
        parallelism={"strategy": "smddp"},
        script=SCRIPT,
        sagemaker={"transformers_version": "4.36.0", "pytorch_version": "2.1.0"},
    )
    job = training_job(spec)
    assert job.versions["py_version"] == job.image_lookup["py_version"] == "py310"
    assert image_uris.retrieve(region="us-east-1", **job.image_lookup).endswith("-py310-cu121-ubuntu20.04")
    files = render(spec).files
    assert "py_version='py310'" in files["sagemaker/launch_v3.py"] + files["sagemaker/launch_v2.py"]
    assert "py312" not in files["sagemaker/launch_v3.py"] + files["sagemaker/launch_v2.py"]
    default = training_job(sagemaker_spec())
    assert image_uris.retrieve(region="us-east-1", **default.image_lookup)
    with pytest.raises(
        ValueError,
        match=r"^sagemaker.py_version 'py312' has no Hugging Face training image for "
        r"transformers 4.36.0 and PyTorch 2.1.0; use py310 \(or leave it out\)$",
    ):
        training_job(
            sagemaker_spec(
                parallelism={"strategy": "smddp"},
                script=SCRIPT,
                sagemaker={"transformers_version": "4.36.0", "pytorch_version": "2.1.0", "py_version": "py312"},
            )
        )
    with pytest.raises(
        ValueError,
        match=r"^sagemaker.pytorch_version '2.9.0' has no Hugging Face training image "
        r"with transformers 4.36.0; use 2.1.0$",
    ):
        training_job(sagemaker_spec(sagemaker={"transformers_version": "4.36", "pytorch_version": "2.9.0"}))


def test_a_v100_instance_gets_the_newest_image_whose_pytorch_build_runs_on_it():
    """The default image (PyTorch 2.9, CUDA 13) and 2.7+cu128 carry no Volta kernels: on ml.p3 they would never
    start training. 2.8+cu129 does (nbtoolkit/hardware/gpu_builds.yaml)."""
    from sagemaker.core import image_uris

    job = training_job(sagemaker_spec(hardware={"instance_type": "ml.p3.16xlarge"}))
    assert (job.versions["transformers_version"], job.versions["pytorch_version"]) == ("4.56.2", "2.8.0")
    assert "pytorch-training:2.8.0-transformers4.56.2-gpu-py312-cu129" in image_uris.retrieve(
        region="us-east-1", **job.image_lookup
    )
    assert training_job(sagemaker_spec()).versions["pytorch_version"] == DEFAULT_VERSIONS["pytorch_version"]
    with pytest.raises(
        ValueError,
        match=r"^sagemaker.pytorch_version 2.9.0 is PyTorch 2.9.0 built for CUDA 13.0, which has no kernels for the "
        r"V100 \(sm_70\) of 'ml.p3.16xlarge'",
    ):
        training_job(
            sagemaker_spec(
                hardware={"instance_type": "ml.p3.16xlarge"},
                sagemaker={"transformers_version": "5.3.0", "pytorch_version": "2.9.0"},
            )
        )


def test_a_user_script_ships_its_directory_and_arguments_become_hyperparameters(tmp_path):
    script = tmp_path / "src" / "run_qa.py"
    script.parent.mkdir()
    script.write_text("print('hi')\n")
    spec = sagemaker_spec(
        script={
            "path": str(script),
            "args": ["--model_name_or_path", "bert-large-uncased", "--do_train", "--max_steps=100"],
        }
    )
    job = training_job(spec)
    assert (job.source_dir, job.entry_script, job.requirements) == (str(script.parent), "run_qa.py", None)
    assert job.hyperparameters == {"model_name_or_path": "bert-large-uncased", "do_train": True, "max_steps": "100"}
    assert not job.checkpoints
    with pytest.raises(ValueError, match="script.args item 'positional' is not a --name"):
        script_hyperparameters(["positional"])


def test_metric_definitions_read_the_same_numbers_as_the_log_parser():
    job = training_job(sagemaker_spec())
    for log in ("trainer_v5_plain.log", "trainer_v4_tqdm.log"):
        text = (DATA / log).read_text()
        parsed = LogParser().feed(text)
        for definition in job.metric_definitions:
            found = [float(match) for match in re.findall(definition["Regex"], text)]
            expected = [record[definition["Name"]] for record in parsed if definition["Name"] in record]
            assert found == expected, (log, definition["Name"])
        assert any(re.search(definition["Regex"], text) for definition in job.metric_definitions)
    # one capture group each (SageMaker reads the first) and within SageMaker's 500-character limit
    assert all(re.compile(item["Regex"]).groups == 1 and len(item["Regex"]) <= 500 for item in job.metric_definitions)


def test_the_exported_scripts_are_python_that_says_what_the_job_is():
    spec = sagemaker_spec(
        parallelism={"strategy": "smp", "tensor_parallel_degree": 2},
        script=SCRIPT,
        sagemaker={"spot": True, "bucket": "my-bucket"},
    )
    files = render(spec).files
    v3, v2 = files["sagemaker/launch_v3.py"], files["sagemaker/launch_v2.py"]
    for name, text in (("launch_v3.py", v3), ("launch_v2.py", v2)):
        compile(text, name, "exec")
    assert "Torchrun(process_count_per_node=8, smp=SMP(tensor_parallel_degree=2))" in v3
    assert "enable_managed_spot_training=True" in v3 and "max_wait_time_in_seconds=172800" in v3
    assert "from sagemaker.huggingface import HuggingFace" in v2 and "use_spot_instances=True" in v2
    assert "'smdistributed': {'modelparallel': {'enabled': True, 'parameters': {'tensor_parallel_degree': 2}}}" in v2
    assert "checkpoint_s3_uri=f's3://{session.default_bucket()}/bert-qa/checkpoints'" in v2


def test_export_cli_writes_the_sdk_scripts_without_starting_anything(tmp_path, home):
    spec_path = tmp_path / "spec.json"
    spec_path.write_text(sagemaker_spec().model_dump_json())
    out = tmp_path / "export"
    result = subprocess.run(
        [PYTHON, "-m", "nbtoolkit.cli", "launch-files", str(spec_path), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert "nbtoolkit.backends.sagemaker.follow --job sagemaker/job.json" in result.stdout
    assert (out / "sagemaker" / "launch_v3.py").is_file() and (out / "sagemaker" / "code" / ENTRY_SCRIPT).is_file()
    assert not (home / "jobs.db").exists()


def test_cost_is_instance_price_times_billable_time_with_spot_savings():
    from datetime import datetime, timezone

    start = datetime(2026, 1, 1, tzinfo=timezone.utc)
    done = {
        "ResourceConfig": {"InstanceCount": 2},
        "BillableTimeInSeconds": 1080,
        "TrainingTimeInSeconds": 3600,
        "EnableManagedSpotTraining": True,
        "TrainingStartTime": start,
    }
    facts = cost_facts(done, 37.688, now=0)
    assert facts["cost_usd"] == round(37.688 * 2 * 1080 / 3600, 4) and facts["hourly_price_usd"] == 75.376
    assert facts["on_demand_cost_usd"] == 75.376 and facts["spot_savings_pct"] == 70.0
    assert not facts["cost_estimated"]
    running = {"ResourceConfig": {"InstanceCount": 1}, "TrainingStartTime": start}
    estimate = cost_facts(running, 1.515, now=start.timestamp() + 600)
    assert estimate["billable_seconds"] == 600 and estimate["cost_estimated"]
    assert estimate["cost_usd"] == pytest.approx(0.2525)
    assert cost_facts(running, None, now=0).get("cost_usd") is None
    assert cost_facts({"ResourceConfig": {"InstanceCount": 1}}, 1.515, now=0)["cost_usd"] == 0  # not training yet
    assert "restarts it from step 0" in not_resumable_message("job-1")


def test_preflight_names_missing_credentials_and_unknown_instance_types(monkeypatch, tmp_path):
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    with pytest.raises(LaunchError, match=r"^no AWS credentials found; run `aws configure`"):
        preflight(sagemaker_spec())
    with pytest.raises(
        LaunchError,
        match=r"'ml.p4d.24xlarg' is not a SageMaker training instance type; "
        r"did you mean ml.p4d.24xlarge",
    ):
        preflight(sagemaker_spec(hardware={"instance_type": "ml.p4d.24xlarg"}))
    with pytest.raises(ValueError, match="sagemaker.role is missing"):
        load_spec({"task": "text-classification", "hardware": {"target": "sagemaker", "instance_type": "ml.g5.xlarge"}})


def test_the_job_description_round_trips_as_json():
    job = training_job(sagemaker_spec(parallelism={"strategy": "smp", "tensor_parallel_degree": 2}, script=SCRIPT))
    assert TrainingJob.model_validate_json(job.model_dump_json()) == job
    assert json.loads(job.model_dump_json())["smp"] == {"tensor_parallel_degree": 2}


class FakeAWS:
    """Just enough of boto3 for the follower: DescribeTrainingJob fails `failures` times, then reports Completed."""

    class NotFound(Exception):
        pass

    def __init__(self, failures):
        self.failures, self.region_name = failures, "us-east-1"
        self.exceptions = self  # logs.exceptions.ResourceNotFoundException
        self.ResourceNotFoundException = FakeAWS.NotFound

    def client(self, name):
        return self

    def describe_training_job(self, TrainingJobName):
        from botocore.exceptions import EndpointConnectionError

        if self.failures:
            self.failures -= 1
            raise EndpointConnectionError(endpoint_url="https://api.sagemaker.us-east-1.amazonaws.com/")
        return {
            "TrainingJobStatus": "Completed",
            "SecondaryStatus": "Completed",
            "BillableTimeInSeconds": 60,
            "ResourceConfig": {"InstanceCount": 1},
            "SecondaryStatusTransitions": [],
        }

    def describe_log_streams(self, **kwargs):
        raise FakeAWS.NotFound


def test_the_follower_rides_out_a_network_blip_and_gives_up_with_a_sentence(monkeypatch, capsys):
    import threading

    from nbtoolkit.backends.sagemaker import follow as sagemaker_follow

    monkeypatch.delenv("NBTOOLKIT_JOB_ID", raising=False)
    follower = sagemaker_follow.Follower(
        FakeAWS(failures=2), "job-1", stop_requested=threading.Event(), poll_s=0, instance_price=1.515
    )
    assert follower.run() == 0
    out = capsys.readouterr().out
    assert out.count("cannot reach AWS, retrying: could not reach AWS") == 2 and "Completed; billable 60 s" in out
    monkeypatch.setattr(sagemaker_follow, "LOST_CONTACT_S", 0.0)
    follower = sagemaker_follow.Follower(FakeAWS(failures=5), "job-1", stop_requested=threading.Event(), poll_s=0)
    with pytest.raises(sagemaker_follow.LostContact, match="may still be running: `nbtoolkit attach job-1`"):
        follower.run()


class RunningAWS(FakeAWS):
    """A training job that runs until stopped; StopTrainingJob is refused (the identity lacks the permission)."""

    def __init__(self, statuses=("InProgress",)):
        super().__init__(failures=0)
        self.statuses = list(statuses)

    def describe_training_job(self, TrainingJobName):
        status = self.statuses.pop(0) if len(self.statuses) > 1 else self.statuses[0]
        return {**super().describe_training_job(TrainingJobName), "TrainingJobStatus": status}

    def stop_training_job(self, TrainingJobName):
        from botocore.exceptions import ClientError

        raise ClientError(
            {
                "Error": {
                    "Code": "AccessDeniedException",
                    "Message": "not authorized to perform: sagemaker:StopTrainingJob",
                },
                "ResponseMetadata": {"HTTPStatusCode": 400},
            },
            "StopTrainingJob",
        )


def test_a_refused_stop_ends_following_with_the_permission_it_needs(monkeypatch):
    import threading

    from nbtoolkit.backends.sagemaker import follow as sagemaker_follow

    monkeypatch.delenv("NBTOOLKIT_JOB_ID", raising=False)
    stop = threading.Event()
    stop.set()
    follower = sagemaker_follow.Follower(RunningAWS(), "job-1", stop_requested=stop, poll_s=0)
    with pytest.raises(sagemaker_follow.StopFailed) as refused:
        follower.run()
    sentence = str(refused.value)
    assert sentence.startswith("AWS denied permission to stop training job job-1: ")
    assert "your identity needs sagemaker:StopTrainingJob;" in sentence and "CreateTrainingJob" not in sentence
    assert "still running (and billing)" in sentence


def test_a_busy_job_store_while_following_does_not_fail_the_remote_job(store, monkeypatch):
    import sqlite3
    import threading

    from nbtoolkit.backends.sagemaker import follow as sagemaker_follow

    record = store.create(name="remote", task="question-answering", backend="sagemaker")
    monkeypatch.setenv("NBTOOLKIT_JOB_ID", record.id)
    merge_info, calls = store.merge_info, []

    def locked_once(*args, **kwargs):
        calls.append(args)
        if len(calls) == 1:
            raise sqlite3.OperationalError("database is locked")
        return merge_info(*args, **kwargs)

    follower = sagemaker_follow.Follower(
        RunningAWS(statuses=["InProgress", "Completed"]),
        "job-1",
        stop_requested=threading.Event(),
        poll_s=0,
        instance_price=1.0,
    )
    follower.record.store = store
    monkeypatch.setattr(store, "merge_info", locked_once)
    assert follower.run() == 0
    assert len(calls) >= 2 and store.get(record.id).info["status"] == "Completed"


def test_a_store_that_cannot_be_opened_while_following_does_not_fail_the_remote_job(store, monkeypatch):
    """Opening the store writes too (schema, WAL): locked then, and a disk I/O error later, are both passing."""
    import sqlite3
    import threading

    from nbtoolkit.backends.sagemaker import follow as sagemaker_follow
    from nbtoolkit.runner import store as store_module

    record = store.create(name="remote", task="question-answering", backend="sagemaker")
    monkeypatch.setenv("NBTOOLKIT_JOB_ID", record.id)
    opened = []

    class BusyStore(store_module.JobStore):
        def __init__(self, *args, **kwargs):
            opened.append(1)
            if len(opened) == 1:
                raise sqlite3.OperationalError("database is locked")
            super().__init__(*args, **kwargs)

        def merge_info(self, *args, **kwargs):
            if len(opened) == 2:
                opened.append(2)
                raise sqlite3.DatabaseError("disk I/O error")
            return super().merge_info(*args, **kwargs)

    monkeypatch.setattr(store_module, "JobStore", BusyStore)
    follower = sagemaker_follow.Follower(
        RunningAWS(statuses=["InProgress", "InProgress", "Completed"]),
        "job-1",
        stop_requested=threading.Event(),
        poll_s=0,
        instance_price=1.0,
    )
    assert follower.run() == 0
    assert len(opened) >= 3 and store.get(record.id).info["status"] == "Completed"


def test_local_data_files_render_as_channels_by_content_and_the_form_says_what_uploads(tmp_path):
    """What a launch with local files would send, without sending it: a channel per split keyed by the content's
    hash (the same bytes under another name: the same object), the container's spec reading the channels, the
    exported script uploading as launch does, and the form's checks saying it before anything starts."""
    from nbtoolkit.notebook.preview import checks

    train, copy = tmp_path / "train.jsonl", tmp_path / "same-rows.jsonl"
    for path in (train, copy):
        path.write_text('{"question": "q", "context": "a c", "answers": {"text": ["c"], "answer_start": [2]}}\n')
    spec = sagemaker_spec(dataset={"files": {"train": str(train), "validation": str(copy)}}, sagemaker={"bucket": "b"})
    files = render(spec).files
    job = TrainingJob.model_validate_json(files[JOB_FILE])
    folder = job.input_channels["data-train"]
    assert folder == job.input_channels["data-validation"] and re.fullmatch(
        r"s3://b/nbtoolkit/data/[0-9a-f]{64}-jsonl/", folder
    )
    assert job.uploads == {f"{folder}data.jsonl": str(copy)}  # one object: the second split's path wins the key
    shipped = load_spec(files[f"{CODE_DIR}/spec.json"])
    assert shipped.dataset.files == {"train": "data-train/data.jsonl", "validation": "data-validation/data.jsonl"}
    script = files["sagemaker/launch_v3.py"]
    compile(script, "launch_v3.py", "exec")
    assert f"'{folder}data.jsonl': '{copy}'" in script and "s3.upload_file(path, bucket, key, ExtraArgs=" in script
    said = [line for line in checks(spec) if line.startswith("before the job starts:")]
    size = f"{copy.stat().st_size:,}"
    assert said == [  # each split's file named, though the two share one object
        f"before the job starts: dataset.files.{split}: {path} ({size} bytes) is uploaded to {folder}data.jsonl at "
        "launch, unless that content is there already (the key is its SHA-256)"
        for split, path in (("train", train), ("validation", copy))
    ]
