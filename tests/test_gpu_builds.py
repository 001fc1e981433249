"""No catalog GPU instance is given an image without kernels for its GPU (nbtoolkit/hardware/gpu_builds.yaml), walked
over every instance x every GPU training image the SageMaker SDK's own table offers. Pure data: no network."""

from __future__ import annotations

import json
import re
from importlib.util import find_spec
from pathlib import Path

import pytest

from nbtoolkit.backends.sagemaker.aws_errors import SageMakerSetupError
from nbtoolkit.backends.sagemaker.images import SMP_IMAGE, huggingface_image_build
from nbtoolkit.backends.sagemaker.instances import SMP_INSTANCE_TYPES
from nbtoolkit.backends.sagemaker.job import training_job
from nbtoolkit.hardware import catalog
from nbtoolkit.hardware.gpu_builds import builds, gpu_capability, gpus, image_build, pytorch_runs_on
from nbtoolkit.spec import SpecError, SpecWarning, load_spec

ROLE = "arn:aws:iam::111122223333:role/sagemaker"
SDK_TABLE = Path(find_spec("sagemaker").submodule_search_locations[0]) / "core" / "image_uri_config"
GPU_INSTANCES = [
    name for name in catalog.instance_names(sagemaker=True) if catalog.instance(name).device.kind == "cuda"
]


def sdk_images(framework: str = "huggingface") -> list[tuple[str, str, str | None]]:
    """(transformers, pytorch, CUDA container) of every GPU training image in the SDK's own table."""
    table = json.loads((SDK_TABLE / f"{framework}.json").read_text())["training"]["versions"]
    return [
        (transformers, name.removeprefix("pytorch"), (entry.get("container_version") or {}).get("gpu"))
        for transformers, frameworks in table.items()
        for name, entry in frameworks.items()
        if name.startswith("pytorch")
    ]


def spec_on(instance: str, **sagemaker):
    return load_spec(
        {
            "task": "text-classification",
            "hardware": {"target": "sagemaker", "instance_type": instance},
            "sagemaker": {"role": ROLE, "region": "us-east-1", **sagemaker},
        }
    )


def test_the_table_knows_the_architectures_the_issue_names_and_every_catalog_gpu():
    assert {
        gpu: gpu_capability(gpu) for gpu in ("V100", "T4", "A100", "A10G", "L4", "L40S", "H100", "H200", "B200")
    } == {
        "V100": (7, 0),
        "T4": (7, 5),
        "A100": (8, 0),
        "A10G": (8, 6),
        "L4": (8, 9),
        "L40S": (8, 9),
        "H100": (9, 0),
        "H200": (9, 0),
        "B200": (10, 0),
    }
    assert {catalog.instance(name).device.gpu for name in GPU_INSTANCES} <= set(gpus())
    assert all(build.source.strip() for build in builds())


@pytest.mark.parametrize(
    ("pytorch", "cuda", "gpu", "runs"),
    [
        ("2.7.1", "12.8", "V100", False),  # the BERT-QA golden's old image on ml.p3
        ("2.8.0", "12.9", "V100", True),  # sm_70 was put back for 2.8 (cu128 and cu129)
        ("2.9.0", "13.0", "V100", False),  # CUDA 13 drops Volta
        ("2.9.0", "13.0", "T4", True),
        ("2.5.1", "12.4", "V100", True),
        ("1.13.1", "11.7", "H100", False),  # no sm_90 cubin and no PTX before CUDA 11.8
        ("2.0.0", "11.8", "H100", True),
        ("2.3.0", "12.1", "L4", True),  # an sm_86 cubin runs on sm_89
        ("2.9.0", "13.0", "B200", True),
        ("2.7.1", "12.8", "B200", True),
    ],
)
def test_which_builds_run_where(pytorch, cuda, gpu, runs):
    assert pytorch_runs_on(pytorch, cuda, gpu) is runs


def test_an_image_tag_says_its_pytorch_and_cuda():
    uri = "763104351884.dkr.ecr.us-east-1.amazonaws.com/huggingface-pytorch-training:2.7.1-transformers4.55.0-gpu-py312-cu128-ubuntu22.04"
    assert image_build(uri) == ("2.7.1", "12.8")
    assert image_build("123.dkr.ecr.us-east-1.amazonaws.com/mine:latest") is None


@pytest.mark.parametrize("instance", GPU_INSTANCES)
def test_every_sdk_image_on_every_catalog_gpu_instance_runs_or_is_refused_with_one_that_does(instance):
    gpu = catalog.instance(instance).device.gpu
    default = training_job(spec_on(instance)).versions
    assert pytorch_runs_on(*huggingface_image_build(default["transformers_version"], default["pytorch_version"]), gpu)
    for transformers, pytorch, container in sdk_images():
        cuda = f"{container[2:4]}.{container[4]}" if container else None
        try:
            job = training_job(spec_on(instance, transformers_version=transformers, pytorch_version=pytorch))
        except (SageMakerSetupError, SpecError) as exc:
            message = str(exc)
            if "has no kernels for" not in message and "has no row for" not in message:
                continue  # another rule (e.g. no image for that Python); not this test's
            assert not pytorch_runs_on(pytorch, cuda, gpu), message
            assert f"'{instance}'" in message and f"sm_{''.join(map(str, gpu_capability(gpu)))}" in message
            works = re.search(r"use transformers_version (\S+) with pytorch_version (\S+) ", message)
            assert works and pytorch_runs_on(*huggingface_image_build(*works.groups()), gpu), message
            assert "\n" not in message and "Traceback" not in message
        else:
            assert pytorch_runs_on(job.versions["pytorch_version"], cuda, gpu), (instance, transformers, pytorch)


def test_the_model_parallel_image_runs_on_every_catalog_instance_it_is_offered_for():
    offered = [name for name in SMP_INSTANCE_TYPES if name.removeprefix("ml.") in catalog.instance_names()]
    assert offered and SMP_IMAGE["container_version"] == "cu121"
    for instance in offered:
        assert pytorch_runs_on(SMP_IMAGE["version"], "12.1", catalog.instance(instance).device.gpu), instance


def test_an_explicit_image_without_kernels_for_the_gpu_is_refused_in_one_sentence():
    uri = "763104351884.dkr.ecr.us-east-1.amazonaws.com/huggingface-pytorch-training:2.9.0-transformers5.3.0-gpu-py312-cu130-ubuntu22.04"
    with pytest.raises((SageMakerSetupError, SpecError)) as caught:
        training_job(spec_on("ml.p3.16xlarge", image_uri=uri))
    assert str(caught.value).startswith(
        f"sagemaker.image_uri '{uri}' is PyTorch 2.9.0 built for CUDA 13.0, which has no kernels for the V100 (sm_70) "
        "of 'ml.p3.16xlarge'"
    )
    assert "use transformers_version 4.56.2 with pytorch_version 2.8.0 (huggingface-pytorch-training:2.8.0-" in str(
        caught.value
    )
    assert training_job(spec_on("ml.p4d.24xlarge", image_uri=uri)).image_uri == uri


@pytest.mark.parametrize(
    ("instance", "transformers", "pytorch", "too_old"),
    [
        ("ml.g4dn.xlarge", "4.6.1", "1.7.1", "transformers >= 4.56.2 and Python >= 3.10"),  # py36
        ("ml.p3.16xlarge", "4.36.0", "2.1.0", "transformers >= 4.56.2 nbtoolkit"),  # py310: only transformers
        # imports the program, but below the floor it is tested with (nbtoolkit/train/supported_versions.py)
        ("ml.g5.2xlarge", "4.55.0", "2.7.1", "transformers >= 4.56.2 nbtoolkit"),
    ],
)
def test_an_image_older_than_the_training_program_needs_is_refused_naming_the_minimum(
    instance, transformers, pytorch, too_old, tmp_path
):
    pyproject = (Path(__file__).parents[1] / "pyproject.toml").read_text()
    assert 'requires-python = ">=3.10"' in pyproject
    with pytest.raises((SageMakerSetupError, SpecError)) as caught:
        training_job(spec_on(instance, transformers_version=transformers, pytorch_version=pytorch))
    message = str(caught.value)
    assert message.startswith(f"sagemaker.transformers_version gives transformers {transformers} on Python 3.")
    assert too_old in message and "\n" not in message
    works = re.search(r"use transformers_version (\S+) with pytorch_version (\S+) ", message)
    assert works and training_job(spec_on(instance, transformers_version=works[1], pytorch_version=works[2]))
    script = tmp_path / "train.py"
    script.write_text("print('an era-matched script')\n")
    own = load_spec(
        {
            "task": "text-classification",
            "script": {"path": str(script)},
            "hardware": {"target": "sagemaker", "instance_type": instance},
            "sagemaker": {"role": ROLE, "transformers_version": transformers, "pytorch_version": pytorch},
        }
    )
    assert training_job(own).versions["transformers_version"] == transformers


def test_an_explicit_hugging_face_image_older_than_the_program_needs_is_refused():
    uri = "763104351884.dkr.ecr.us-east-1.amazonaws.com/huggingface-pytorch-training:1.6.0-transformers4.4.2-gpu-py36-cu110-ubuntu18.04"
    with pytest.raises((SageMakerSetupError, SpecError), match=r"^sagemaker.image_uri '.*' gives transformers 4.4.2 "):
        training_job(spec_on("ml.g4dn.xlarge", image_uri=uri))


def test_a_gpu_instance_the_catalog_does_not_know_is_refused_not_waved_through():
    with pytest.raises((SageMakerSetupError, SpecError)) as caught:
        training_job(spec_on("ml.p2.xlarge"))  # a K80 (sm_37) no current image runs on
    assert str(caught.value).startswith(
        "hardware.instance_type 'ml.p2.xlarge' is a GPU instance nbtoolkit's catalog does not know, so no image can "
        "be checked for kernels for its GPU; use one of ml.p3.2xlarge, "
    )
    uri = "763104351884.dkr.ecr.us-east-1.amazonaws.com/huggingface-pytorch-training:2.5.1-transformers4.49.0-gpu-py311-cu124-ubuntu22.04"
    with pytest.raises((SageMakerSetupError, SpecError), match=r"no kernels for the B200 \(sm_100\) of 'ml.p6-b200"):
        training_job(spec_on("ml.p6-b200.48xlarge", image_uri=uri))
    for instance in ("ml.p5en.48xlarge", "ml.g6e.xlarge", "ml.g6.4xlarge"):
        assert training_job(spec_on(instance)).versions["pytorch_version"]


def test_an_image_uri_whose_tag_says_no_cuda_is_refused_if_cpu_and_warned_about_if_unreadable():
    cpu = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.8.0-cpu-py312-ubuntu22.04-sagemaker"
    with pytest.raises((SageMakerSetupError, SpecError)) as caught:
        training_job(spec_on("ml.p3.16xlarge", image_uri=cpu))
    assert str(caught.value).startswith(
        f"sagemaker.image_uri '{cpu}' is a CPU image, which would train on none of the V100 GPUs of 'ml.p3.16xlarge'"
    )
    pinned = "763104351884.dkr.ecr.us-east-1.amazonaws.com/huggingface-pytorch-training@sha256:" + "0a" * 32
    with pytest.warns(SpecWarning, match=r"names no PyTorch and CUDA in its tag, so nbtoolkit cannot check .* V100"):
        assert training_job(spec_on("ml.p3.16xlarge", image_uri=pinned)).image_uri == pinned
    assert training_job(spec_on("ml.m5.xlarge", image_uri=cpu)).image_uri == cpu  # a CPU image on a CPU instance


def test_a_build_the_table_lacks_is_refused_as_unchecked_not_as_kernel_less():
    uri = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.0.1-gpu-py310-cu121-ubuntu20.04-sagemaker"
    with pytest.raises((SageMakerSetupError, SpecError)) as caught:
        training_job(spec_on("ml.p4d.24xlarge", image_uri=uri))
    assert "has no kernels" not in str(caught.value)
    assert str(caught.value).startswith(
        f"sagemaker.image_uri '{uri}' is PyTorch 2.0.1 built for CUDA 12.1, a build nbtoolkit/hardware/gpu_builds.yaml has no "
        "row for, so whether it has kernels for the A100 (sm_80) of 'ml.p4d.24xlarge' cannot be checked; use "
    )
