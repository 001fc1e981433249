"""Which training image a SageMaker job runs, and whether it can: the SDK's Hugging Face image tables (read, not
fetched), the Trainium and model-parallel images named outright, and the checks that an image carries what the
program needs (transformers, Python) and kernels for the instance's GPU. Pure: no SDK call, no network.
"""

from __future__ import annotations

import importlib.util
import json
import re
import warnings
from functools import cache
from pathlib import Path
from typing import Any

from nbtoolkit.backends.sagemaker.aws_errors import SageMakerSetupError
from nbtoolkit.backends.sagemaker.instances import accelerator_of, unknown_instance_message
from nbtoolkit.backends.sagemaker.settings import region_image
from nbtoolkit.hardware.catalog import CatalogError, instance_names
from nbtoolkit.hardware.catalog import instance as catalog_instance
from nbtoolkit.hardware.gpu_builds import build_known, cuda_of, image_build, pytorch_runs_on, sm_name
from nbtoolkit.launching.shipping import (
    DISTRIBUTION,  # whose requirements (pyproject.toml) the program needs in the image
)
from nbtoolkit.spec import RunSpec, SpecWarning
from nbtoolkit.train.supported_versions import floor_version

#: The newest Hugging Face training image the SDK knows (transformers 5, which nbtoolkit.train is written for)
DEFAULT_VERSIONS = {"transformers_version": "5.3.0", "pytorch_version": "2.9.0", "py_version": "py312"}


#: SageMaker model parallel v2 image (smdistributed-modelparallel), resolved through the SDK as `pytorch-smp`
SMP_IMAGE = {"framework": "pytorch-smp", "version": "2.4.1", "py_version": "py311", "container_version": "cu121"}


#: in an image URI nbtoolkit names, replaced by the ECR registry (account and domain) of the job's region
REGISTRY_PLACEHOLDER = "{registry}"

#: The SDKs cannot look up Hugging Face Trainium (neuronx) training images, so this one is named outright:
#: transformers 4.55.4, PyTorch 2.8 (torch-neuronx), Neuron SDK 2.26 with optimum-neuron 0.4.1, as Hugging Face's
#: published table of its DLCs names it (tests/facts/hf-neuronx-training-images.json). The SDK's own
#: huggingface-neuronx.json pairs 4.55.4 with pytorch2.7.0, a tag that table does not have; its registries (the
#: account differs by region) are what the job takes from that entry (TRAINIUM_TABLE_ENTRY).
TRAINIUM_IMAGE = (
    f"{REGISTRY_PLACEHOLDER}/huggingface-pytorch-training-neuronx:"
    "2.8.0-transformers4.55.4-neuronx-py310-sdk2.26.0-ubuntu22.04"
)
#: the entry of huggingface-neuronx.json's training table whose registries hold TRAINIUM_IMAGE's repository
TRAINIUM_TABLE_ENTRY = ("4.55.4", "pytorch2.7.0")


#: a Hugging Face DLC tag's transformers and Python: `:<torch>-transformers<x>-gpu-py<NN>-...`
IMAGE_VERSIONS = re.compile(r":[\d.]+-transformers(?P<transformers>[\d.]+)-\w+-(?P<py>py\d+)\b")


#: a DLC tag for CPU instances (`:2.8.0-cpu-py312-...`): no CUDA in it at all
CPU_TAG = re.compile(r":[^/@]*\bcpu\b")


def training_image(spec: RunSpec, instance: str) -> tuple[str | None, dict[str, str] | None, dict[str, str] | None]:
    """(explicit image URI, image lookup, Hugging Face versions) for the instance and strategy: only an image
    whose PyTorch build has kernels for the instance's GPU (nbtoolkit/hardware/gpu_builds.yaml)."""
    settings = spec.sagemaker
    gpu = _gpu(instance)
    if settings.image_uri:
        if gpu is not None:
            _check_image_uri(settings.image_uri, instance, gpu)
        elif accelerator_of(instance) == "neuron":
            _check_neuron_image_uri(settings.image_uri, instance)
        return settings.image_uri, None, None
    if accelerator_of(instance) == "neuron":
        return TRAINIUM_IMAGE, None, None
    if spec.parallelism.strategy == "smp":
        return None, {**SMP_IMAGE, "image_scope": "training", "instance_type": instance}, None
    if accelerator_of(instance) != "cuda":
        raise SageMakerSetupError(
            f"hardware.instance_type '{instance}' has no GPU, and Hugging Face training images exist for GPU "
            "instances only; choose an ml.g5/ml.p4d-class instance or give sagemaker.image_uri"
        )
    versions = {
        "transformers_version": settings.transformers_version or DEFAULT_VERSIONS["transformers_version"],
        "pytorch_version": settings.pytorch_version or DEFAULT_VERSIONS["pytorch_version"],
    }
    build = huggingface_image_build(versions["transformers_version"], versions["pytorch_version"])
    if gpu is not None and not pytorch_runs_on(*build, gpu):
        if settings.pytorch_version or settings.transformers_version:
            field = "sagemaker.pytorch_version" if settings.pytorch_version else "sagemaker.transformers_version"
            raise SageMakerSetupError(_no_kernels(f"{field} {versions[field.split('.')[1]]}", build, instance, gpu))
        versions = newest_huggingface_image(gpu)
    versions["py_version"] = image_python(
        versions["transformers_version"], versions["pytorch_version"], settings.py_version
    )
    lookup = {
        "framework": "huggingface",
        "version": versions["transformers_version"],
        "base_framework_version": f"pytorch{versions['pytorch_version']}",
        "py_version": versions["py_version"],
        "image_scope": "training",
        "instance_type": instance,
    }
    return None, lookup, versions


def _check_image_uri(image_uri: str, instance: str, gpu: str) -> None:
    """An explicit image on a GPU instance: refused without kernels for its GPU (or without CUDA at all);
    one whose tag does not say (a digest, a custom tag) runs, with a warning that it was not checked."""
    what = f"sagemaker.image_uri '{image_uri}'"
    build = image_build(image_uri)
    if build is not None:
        if not pytorch_runs_on(*build, gpu):
            raise SageMakerSetupError(_no_kernels(what, build, instance, gpu))
        return
    works = newest_huggingface_image(gpu)
    instead = (
        f"use transformers_version {works['transformers_version']} with pytorch_version "
        f"{works['pytorch_version']} ({huggingface_image_tag(works)})"
    )
    if CPU_TAG.search(image_uri):
        raise SageMakerSetupError(
            f"{what} is a CPU image, which would train on none of the {gpu} GPUs of '{instance}' while they bill; "
            f"give a -gpu- image built for CUDA, or {instead}"
        )
    warnings.warn(
        f"{what} names no PyTorch and CUDA in its tag, so nbtoolkit cannot check that it has kernels for the {gpu} "
        f"({sm_name(gpu)}) of '{instance}'; give a tag that names them (<torch>-...-cu<NNN>), or {instead}",
        SpecWarning,
        stacklevel=2,
    )


#: a Neuron DLC tag's SDK release (`...-neuronx-py310-sdk2.26.0-...`)
NEURON_SDK = re.compile(r"-sdk(\d+)\.(\d+)")
#: the Neuron SDK the program is tested against (its optimum-neuron 0.4.1: tests/facts/optimum-neuron-0.4.1.json)
TESTED_NEURON_SDK = (2, 26)


def _check_neuron_image_uri(image_uri: str, instance: str) -> None:
    """An explicit image on a Trainium instance: one without the Neuron stack (a GPU or CPU image) would train on
    the host's CPU while the Trainium chips bill; an older Neuron SDK's optimum-neuron takes another trainer path
    nothing here rehearses. Refused in one sentence; a tag that names no SDK is run with a warning."""
    what = f"sagemaker.image_uri '{image_uri}'"
    default = TRAINIUM_IMAGE.rsplit(":", 1)[1]
    if "neuronx" not in image_uri:
        raise SageMakerSetupError(
            f"{what} is no Neuron image (its name says no neuronx), so on '{instance}' the job would train on the "
            f"host's CPU while the Trainium chips bill; leave sagemaker.image_uri out for Neuron SDK 2.26's "
            f"({default}), or give a huggingface-pytorch-training-neuronx image"
        )
    found = NEURON_SDK.search(image_uri.rsplit(":", 1)[-1])
    if found is None:
        warnings.warn(
            f"{what} names no Neuron SDK in its tag, so nbtoolkit cannot check it is 2.26 or newer (the SDK its "
            f"program is tested with); give a tag that names it (-sdk2.26.0-), or leave image_uri out ({default})",
            SpecWarning,
            stacklevel=2,
        )
    elif (int(found[1]), int(found[2])) < TESTED_NEURON_SDK:
        raise SageMakerSetupError(
            f"{what} holds Neuron SDK {found[1]}.{found[2]}, older than the 2.26 nbtoolkit's program is tested with "
            f"(its optimum-neuron 0.4.1); leave sagemaker.image_uri out for {default}, or run your own script "
            "(script:)"
        )


def _gpu(instance: str) -> str | None:
    """The NVIDIA GPU of an instance type (None: no GPU, or no SageMaker type); a GPU instance the catalog lacks is
    refused, since no image could be checked for kernels for its GPU."""
    try:
        return catalog_instance(instance).device.gpu
    except CatalogError:
        if accelerator_of(instance) != "cuda":
            return None
        try:
            if unknown_instance_message(instance):
                return None  # not a SageMaker instance type at all: preflight's sentence names the close ones
        except ImportError:  # no botocore here: the catalog's sentence still names what is known
            pass
        known = [name for name in instance_names(sagemaker=True) if accelerator_of(name) == "cuda"]
        raise SageMakerSetupError(
            f"hardware.instance_type '{instance}' is a GPU instance nbtoolkit's catalog does not know, so no image "
            f"can be checked for kernels for its GPU; use one of {', '.join(known)} (or add it, with its GPU, to "
            "nbtoolkit/hardware/catalog.yaml)"
        ) from None


def _no_kernels(what: str, build: tuple[str, str | None], instance: str, gpu: str) -> str:
    """The sentence for an image without kernels for the instance's GPU (or whose build the table lacks), naming
    one that has them."""
    pytorch, cuda = build
    works = newest_huggingface_image(gpu)
    why = (
        f", which has no kernels for the {gpu} ({sm_name(gpu)}) of '{instance}' and would fail at its first CUDA "
        "kernel after the instances start billing"
        if build_known(pytorch, cuda)
        else f", a build nbtoolkit/hardware/gpu_builds.yaml has no row for, so whether it has kernels for the {gpu} "
        f"({sm_name(gpu)}) of '{instance}' cannot be checked"
    )
    return (
        f"{what} is PyTorch {pytorch}"
        + (f" built for CUDA {cuda}" if cuda else "")
        + f"{why}; use transformers_version {works['transformers_version']} with "
        f"pytorch_version {works['pytorch_version']} ({huggingface_image_tag(works)}), or leave the versions out "
        "to get it"
    )


def _release(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", version)[:3])


@cache
def own_program_needs() -> dict[str, str]:
    """The transformers and Python releases nbtoolkit's training program needs: the floor's transformers
    (nbtoolkit.train.supported_versions, the oldest it is tested with) and the distribution's own Requires-Python,
    so an image older than them is refused before it bills."""
    import importlib.metadata

    python = importlib.metadata.metadata(DISTRIBUTION)["Requires-Python"].removeprefix(">=").strip()
    return {"transformers": floor_version("transformers"), "Python": python}


def check_own_program_image(instance: str, image_uri: str | None, versions: dict[str, str] | None) -> None:
    """An image with a transformers or Python older than nbtoolkit's program needs would bill, then fail at import
    (or, its transformers replaced by the requirements.txt's floor, run a stack nobody tested). A Trainium image is
    left to the Neuron SDK's own pins (its optimum-neuron 0.4.1 holds transformers at 4.55.4)."""
    if accelerator_of(instance) == "neuron":
        return
    if versions is not None:
        what, has = "sagemaker.transformers_version", {"transformers": versions["transformers_version"]}
        has["Python"] = python_release(versions["py_version"])
    else:
        found = IMAGE_VERSIONS.search(image_uri or "")
        if found is None:
            return  # a PyTorch or custom image: its tag does not say, and the program's import says at start
        what, has = f"sagemaker.image_uri '{image_uri}'", {"transformers": found["transformers"]}
        has["Python"] = python_release(found["py"])
    older = [name for name, minimum in own_program_needs().items() if _release(has[name]) < _release(minimum)]
    if older:
        gpu = _gpu(instance)
        works = newest_huggingface_image(gpu) if gpu else dict(DEFAULT_VERSIONS)
        raise SageMakerSetupError(
            f"{what} gives transformers {has['transformers']} on Python {has['Python']}, older than the "
            + " and ".join(f"{name} >= {own_program_needs()[name]}" for name in older)
            + " nbtoolkit's training program needs; use transformers_version "
            f"{works['transformers_version']} with pytorch_version {works['pytorch_version']} "
            f"({huggingface_image_tag(works)}), run your own script (script:), or leave the versions out to get it"
        )


def python_release(py_version: str) -> str:
    """'py310' -> '3.10' (an image tag's or the SDK's Python)."""
    digits = py_version.removeprefix("py")
    return f"{digits[0]}.{digits[1:]}"


def _framework_entry(transformers_version: str, pytorch_version: str) -> dict[str, Any] | None:
    """The SDK table's entry for a Hugging Face training image (None without the SDK or for unknown versions)."""
    table = huggingface_training_images()
    if table is None:
        return None
    transformers = (table.get("version_aliases") or {}).get(transformers_version, transformers_version)
    frameworks = table["versions"].get(transformers) or {}
    key = f"pytorch{pytorch_version}"
    return frameworks.get((frameworks.get("version_aliases") or {}).get(key, key))


def huggingface_image_build(transformers_version: str, pytorch_version: str) -> tuple[str, str | None]:
    """(PyTorch release, CUDA) of a Hugging Face GPU training image, the CUDA from the SDK's table."""
    entry = _framework_entry(transformers_version, pytorch_version) or {}
    return pytorch_version, cuda_of((entry.get("container_version") or {}).get("gpu"))


def huggingface_image_tag(versions: dict[str, str]) -> str:
    entry = _framework_entry(versions["transformers_version"], versions["pytorch_version"]) or {}
    container = (entry.get("container_version") or {}).get("gpu")
    py = versions.get("py_version") or (entry.get("py_versions") or ["py3"])[-1]
    return (
        f"huggingface-pytorch-training:{versions['pytorch_version']}-transformers{versions['transformers_version']}"
        f"-gpu-{py}" + (f"-{container}" if container else "")
    )


def huggingface_images() -> list[dict[str, str]]:
    """Every Hugging Face GPU training image in the SDK's table, as versions (empty without the SDK)."""
    table = huggingface_training_images() or {"versions": {}}
    return [
        {"transformers_version": transformers, "pytorch_version": name.removeprefix("pytorch")}
        for transformers, frameworks in table["versions"].items()
        for name in frameworks
        if name.startswith("pytorch")
    ]


def newest_huggingface_image(gpu: str) -> dict[str, str]:
    """The newest Hugging Face training image (transformers, then PyTorch) whose build runs on `gpu`."""
    runs = [
        versions
        for versions in huggingface_images()
        if pytorch_runs_on(*huggingface_image_build(versions["transformers_version"], versions["pytorch_version"]), gpu)
    ]
    if not runs:
        raise SageMakerSetupError(
            f"no Hugging Face training image this SageMaker SDK knows runs on the {gpu} ({sm_name(gpu)}); "
            "give sagemaker.image_uri of one built for it"
        )
    return max(runs, key=lambda v: (_release(v["transformers_version"]), _release(v["pytorch_version"])))


def image_python(transformers_version: str, pytorch_version: str, wanted: str | None) -> str:
    """The Python of the Hugging Face training image for these versions, from the SDK's own image table.

    Without the SDK installed (an export on a machine without it), the wanted or default version is
    kept: the submit, which needs the SDK, checks it then.
    """
    table = huggingface_training_images()
    if table is None:
        return wanted or DEFAULT_VERSIONS["py_version"]
    transformers = (table.get("version_aliases") or {}).get(transformers_version, transformers_version)
    if transformers not in table["versions"]:
        raise SageMakerSetupError(
            f"sagemaker.transformers_version '{transformers_version}' has no Hugging Face training image; "
            f"use one of {', '.join(table['versions'])}"
        )
    frameworks = table["versions"][transformers]
    key = f"pytorch{pytorch_version}"
    key = (frameworks.get("version_aliases") or {}).get(key, key)
    if key not in frameworks:
        pytorches = [name.removeprefix("pytorch") for name in frameworks if name.startswith("pytorch")]
        raise SageMakerSetupError(
            f"sagemaker.pytorch_version '{pytorch_version}' has no Hugging Face training image with transformers "
            f"{transformers}; use {', '.join(pytorches)}"
        )
    pythons = frameworks[key]["py_versions"]
    if wanted is None:
        return pythons[-1]
    if wanted not in pythons:
        raise SageMakerSetupError(
            f"sagemaker.py_version '{wanted}' has no Hugging Face training image for transformers {transformers} "
            f"and PyTorch {pytorch_version}; use {', '.join(pythons)} (or leave it out)"
        )
    return wanted


def huggingface_training_images() -> dict[str, Any] | None:
    """The SageMaker SDK's table of Hugging Face GPU training images (huggingface.json); None without the SDK."""
    return _sdk_training_images("huggingface.json")


@cache
def _sdk_training_images(file: str) -> dict[str, Any] | None:
    """The training table of one of the SageMaker SDK's image files, read without importing the SDK; None when the
    SDK is not installed."""
    found = importlib.util.find_spec("sagemaker")
    if found is None or not found.submodule_search_locations:
        return None
    table = Path(found.submodule_search_locations[0]) / "core" / "image_uri_config" / file
    return json.loads(table.read_text())["training"] if table.is_file() else None


def trainium_registries() -> dict[str, str]:
    """Region -> ECR registry host of the Trainium image, from the SDK's huggingface-neuronx.json (the account
    differs by region: 763104351884 in most, others in the newer, China and GovCloud regions)."""
    table = _sdk_training_images("huggingface-neuronx.json")
    if table is None:
        raise SageMakerSetupError(
            "a Trainium (ml.trn1) SageMaker job takes its image's registry for the job's region from the SageMaker "
            f"SDK's image table, and the SDK is not installed here; install it (pip install '{DISTRIBUTION}[sagemaker]')"
        )
    transformers, pytorch = TRAINIUM_TABLE_ENTRY
    accounts = table["versions"][transformers][pytorch]["registries"]
    return {region: f"{account}.dkr.ecr.{region}.{ecr_domain(region)}" for region, account in accounts.items()}


def ecr_domain(region: str) -> str:
    """The DNS suffix of ECR in a region: amazonaws.com.cn in China, amazonaws.com in the other partitions the
    SDK's tables list (the SDK asks botocore's endpoint resolver, sagemaker/core/image_uris.py:226-229, whose answer
    matches its own ALTERNATE_DOMAINS, sagemaker/core/common_utils.py:56-67)."""
    return "amazonaws.com.cn" if region.startswith("cn-") else "amazonaws.com"


def regional_registry(registries: dict[str, str], region: str) -> str:
    """The image's registry in `region`; a region the SDK lists none for is refused before anything bills."""
    if region not in registries:
        raise SageMakerSetupError(no_registry_message(region, registries))
    return registries[region]


def regional_image(image_uri: str, registries: dict[str, str], region: str) -> str:
    """The image URI for `region`: its {region}, and for an image nbtoolkit names its {registry}, put in."""
    if REGISTRY_PLACEHOLDER in image_uri:
        image_uri = image_uri.replace(REGISTRY_PLACEHOLDER, regional_registry(registries, region))
    return region_image(image_uri, region)


def no_registry_message(region: str, registries: dict[str, str]) -> str:
    return (
        f"the SageMaker SDK lists no registry of the Trainium training image in region '{region}' (it lists one in "
        f"{', '.join(sorted(registries))}); run the job in one of those (sagemaker.region)"
    )
