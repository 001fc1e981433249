"""A SageMaker training job described from a spec: pure data, no SDK, no network.

One description, three uses: the follower submits it (sagemaker_submit), `nbtoolkit export`
writes it as copyable SDK code (sagemaker_export), and the job directory keeps it as
`sagemaker/job.json`. Every rule that can be checked without AWS is checked here, with the
sentence the user reads.
"""

from __future__ import annotations

import importlib.util
import json
import re
import warnings
from functools import cache
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from nbtoolkit.backends.neuron.render import neuron_env
from nbtoolkit.backends.program import BASE_ENV
from nbtoolkit.backends.sagemaker.data_channels import CHANNEL_NAME, container_file, data_channels
from nbtoolkit.backends.sagemaker.instances import (
    SMDDP_INSTANCE_TYPES,
    SMP_INSTANCE_TYPES,
    accelerator_of,
    unknown_instance_message,
)
from nbtoolkit.catalog import CatalogError, instance_names
from nbtoolkit.catalog import instance as catalog_instance
from nbtoolkit.credentials import is_secret_variable
from nbtoolkit.gpu_builds import build_known, cuda_of, image_build, pytorch_runs_on, sm_name
from nbtoolkit.metrics.parse import pair_pattern
from nbtoolkit.spec import RunSpec, SpecWarning

JOB_FILE = "sagemaker/job.json"
#: the job's code as shipped for nbtoolkit's own program: spec, entry script, requirements (+ the package)
CODE_DIR = "sagemaker/code"
ENTRY_SCRIPT = "nbtoolkit_train.py"
#: the precompile job's shorter run of nbtoolkit's program (neuron.precompile_steps), and how the entry picks it
PRECOMPILE_SPEC_FILE = "precompile.json"
SPEC_FILE_ENV = "NBTOOLKIT_SPEC_FILE"
#: in the environment, replaced at submit by s3://<bucket>/<base job name>/neuron-cache (the bucket may be the SDK's)
NEURON_CACHE = "{neuron_cache}"
#: parts of the installed package a training container does not need
PACKAGE_IGNORE = ("__pycache__", "*.pyc", "labextension", "static")
REQUIREMENTS = "requirements.txt"
#: where the training program keeps checkpoints in the container; synced to S3 when configured
CHECKPOINT_LOCAL_PATH = "/opt/ml/checkpoints"
CHECKPOINT_DIR_ENV = "NBTOOLKIT_CHECKPOINT_DIR"
#: the input channel an earlier job's model (`model: s3://.../model.tar.gz`, what `model: job:ID` resolves to)
#: arrives in: SageMaker copies it to /opt/ml/input/data/model and names that folder in SM_CHANNEL_MODEL
MODEL_CHANNEL = "model"

#: The newest Hugging Face training image the SDK knows (transformers 5, which nbtoolkit.train is written for)
DEFAULT_VERSIONS = {"transformers_version": "5.3.0", "pytorch_version": "2.9.0", "py_version": "py312"}
#: how a script starts SageMaker model parallel v2 (torch.sagemaker); SMP v1's smdistributed.modelparallel
#: does not run on the v2 image
SMP_V2_INIT = re.compile(
    r"^\s*(import\s+torch\.sagemaker\b|from\s+torch\.sagemaker\b|from\s+torch\s+import\s+sagemaker\b)", re.MULTILINE
)
#: SageMaker model parallel v2 image (smdistributed-modelparallel), resolved through the SDK as `pytorch-smp`
SMP_IMAGE = {"framework": "pytorch-smp", "version": "2.4.1", "py_version": "py311", "container_version": "cu121"}
#: The SDKs cannot look up Hugging Face Trainium (neuronx) training images, so this one is named outright:
#: transformers 4.55.4, PyTorch 2.7, Neuron SDK 2.26 (from the SDK's own huggingface-neuronx table).
TRAINIUM_IMAGE = (
    "763104351884.dkr.ecr.{region}.amazonaws.com/huggingface-pytorch-training-neuronx:"
    "2.7.0-transformers4.55.4-neuronx-py310-sdk2.26.0-ubuntu22.04"
)
#: the distribution whose requirements (pyproject.toml) nbtoolkit's training program needs in the image
DISTRIBUTION = "nbtoolkit-finetune"
#: a Hugging Face DLC tag's transformers and Python: `:<torch>-transformers<x>-gpu-py<NN>-...`
IMAGE_VERSIONS = re.compile(r":[\d.]+-transformers(?P<transformers>[\d.]+)-\w+-(?P<py>py\d+)\b")
#: a DLC tag for CPU instances (`:2.8.0-cpu-py312-...`): no CUDA in it at all
CPU_TAG = re.compile(r":[^/@]*\bcpu\b")
#: The SageMaker SDK v2 refuses smdistributed data parallel on Hugging Face images with PyTorch >= 2.2
SMDDP_PYTORCH_BELOW = (2, 2)
SMDDP_ENV = {"ACCELERATE_USE_SAGEMAKER": "true", "ACCELERATE_SAGEMAKER_DISTRIBUTED_TYPE": "DATA_PARALLEL"}
#: the Torchrun driver of SDK v3 runs `neuron_parallel_compile torchrun ...` when this is set
PRECOMPILE_ENV = {"RUN_NEURON_PARALLEL_COMPILE": "1", SPEC_FILE_ENV: PRECOMPILE_SPEC_FILE}
#: Trainer log keys charted in the SageMaker console (its limit is 40 definitions)
METRIC_KEYS = (
    "loss",
    "learning_rate",
    "grad_norm",
    "epoch",
    "eval_loss",
    "eval_accuracy",
    "eval_f1",
    "train_runtime",
    "train_samples_per_second",
    "train_steps_per_second",
    "train_loss",
)

Phase = Literal["train", "precompile"]
#: why nbtoolkit's own program cannot use SageMaker's distributed libraries with the images the SDK resolves
OWN_PROGRAM_CANNOT = {
    "smddp": "parallelism.strategy 'smddp' with nbtoolkit's training program needs sagemaker.image_uri: the Hugging "
    "Face images that ship SageMaker data parallel (PyTorch < 2.2, transformers 4.36) predate the "
    "transformers >= {transformers} it needs; give an image with both, run your own script (script:), or use ddp",
    "smp": "parallelism.strategy 'smp' needs a training script that calls torch.sagemaker.init() and "
    "torch.sagemaker.transform(model) (SageMaker model parallel v2), which nbtoolkit's training program does "
    "not; give script: with one (or sagemaker.image_uri if yours does), or use ddp",
}


class SageMakerSetupError(ValueError):
    """A spec SageMaker cannot run as asked; the message is the sentence the user reads."""


class TrainingJob(BaseModel):
    """Everything CreateTrainingJob needs except what only AWS knows (account bucket, image URI lookup)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    base_job_name: str
    role: str
    region: str | None
    bucket: str | None
    #: an explicit image (may hold `{region}`), else `image_lookup`: kwargs for sagemaker.core.image_uris.retrieve
    image_uri: str | None
    image_lookup: dict[str, str] | None
    #: the Hugging Face DLC versions (for the v2 estimator export); None with an explicit or SMP image
    versions: dict[str, str] | None
    instance_type: str
    instance_count: int
    #: on-demand USD per instance-hour: the spec's hardware.hourly_price_usd, else the catalog's
    hourly_price_usd: float | None
    volume_size_gb: int
    max_run: int
    max_wait: int | None
    spot: bool
    checkpoint_s3_uri: str | None
    #: whether CheckpointConfig is sent (spot jobs and jobs with a checkpoint URI); S3 URI None = SDK default
    checkpoints: bool
    strategy: str
    #: torchrun (SDK v3 Torchrun driver) rather than one process
    distributed: bool
    #: processes per instance under torchrun; None: one per GPU or NeuronCore
    processes_per_node: int | None
    smp: dict[str, int] | None
    precompile: bool
    environment: dict[str, str]
    #: channel name -> S3 URI SageMaker copies into /opt/ml/input/data/<name> before the program starts
    input_channels: dict[str, str]
    #: S3 object URI -> the local data file submit uploads there first (skipped when already there)
    uploads: dict[str, str] = {}
    hyperparameters: dict[str, Any]
    metric_definitions: list[dict[str, str]]
    #: relative to the job directory (nbtoolkit's program, staged at submit) or an absolute path (user script)
    source_dir: str
    entry_script: str
    requirements: str | None

    def for_phase(self, phase: Phase) -> TrainingJob:
        """The precompile job: a short run under neuron_parallel_compile that fills the compile cache on S3
        the training job then reads; its numbers are not metrics."""
        if phase == "train":
            return self
        return self.model_copy(
            update={
                "base_job_name": f"{self.base_job_name}-precompile",
                "environment": {**self.environment, **PRECOMPILE_ENV},
                "metric_definitions": [],
            }
        )


def metric_definitions() -> list[dict[str, str]]:
    """SageMaker metric regexes built from the log parser's own pattern, one per Trainer key."""
    return [{"Name": key, "Regex": pair_pattern(re.escape(key))} for key in METRIC_KEYS]


def base_job_name(spec: RunSpec) -> str:
    """A SageMaker-safe prefix (letters, digits, dashes); the SDK appends a timestamp."""
    name = re.sub(r"[^A-Za-z0-9]+", "-", spec.display_name).strip("-")[:40].strip("-")
    return name or "nbtoolkit"


def training_job(spec: RunSpec) -> TrainingJob:
    """The SageMaker training job for a spec; raises SageMakerSetupError with one sentence."""
    settings, hardware = spec.sagemaker, spec.hardware
    if settings is None or hardware.instance_type is None:  # RunSpec refuses this for target sagemaker
        raise SageMakerSetupError(
            "a SageMaker job needs hardware.target: sagemaker, sagemaker.role and hardware.instance_type"
        )
    instance = hardware.instance_type
    _check_accelerator(spec, instance)
    _check_inputs(spec)
    _check_data(spec)
    _check_environment(settings.environment)
    strategy = spec.parallelism.strategy
    image_uri, image_lookup, versions = _image(spec, instance)
    _check_distribution(spec, instance, image_uri, versions)
    if spec.script is None:
        _check_own_program_image(instance, image_uri, versions)
    trainium = accelerator_of(instance) == "neuron"
    distributed = strategy != "none" or spec.world_size > 1 or trainium
    own_program = spec.script is None
    environment = {
        **BASE_ENV,
        CHECKPOINT_DIR_ENV: CHECKPOINT_LOCAL_PATH,
        **(SMDDP_ENV if strategy == "smddp" else {}),
        **(trainium_env(spec) if trainium else {}),
        **settings.environment,
    }
    return TrainingJob(
        base_job_name=base_job_name(spec),
        role=settings.role,
        region=settings.region,
        bucket=settings.bucket,
        image_uri=image_uri,
        image_lookup=image_lookup,
        versions=versions,
        instance_type=instance,
        instance_count=hardware.nodes,
        hourly_price_usd=hardware.instance_price_usd,
        volume_size_gb=settings.volume_size_gb,
        max_run=settings.max_run,
        max_wait=(settings.max_wait or 2 * settings.max_run) if settings.spot else None,
        spot=settings.spot,
        checkpoint_s3_uri=settings.checkpoint_s3_uri,
        checkpoints=syncs_checkpoints(spec),
        strategy=strategy,
        distributed=distributed,
        processes_per_node=hardware.devices if distributed and hardware.devices > 1 else None,
        smp={"tensor_parallel_degree": spec.parallelism.tensor_parallel_degree} if strategy == "smp" else None,
        precompile=trainium and spec.neuron.precompile,
        environment=environment,
        input_channels={MODEL_CHANNEL: spec.model} if spec.model and spec.model.startswith("s3://") else {},
        hyperparameters={} if own_program else script_hyperparameters(spec.script.args),
        metric_definitions=metric_definitions(),
        source_dir=CODE_DIR if own_program else str(_script_source_dir(spec)),
        entry_script=ENTRY_SCRIPT if own_program else _script_entry(spec),
        requirements=REQUIREMENTS if own_program else None,
    )


def trainium_env(spec: RunSpec) -> dict[str, str]:
    """The Neuron backend's environment, with the persistent compile cache on S3 (shared by both jobs)."""
    cache = spec.neuron.cache_dir if spec.neuron.cache_dir.startswith("s3://") else NEURON_CACHE
    return neuron_env(spec.model_copy(update={"neuron": spec.neuron.model_copy(update={"cache_dir": cache})}))


def syncs_checkpoints(spec: RunSpec) -> bool:
    """Spot jobs, and jobs given a checkpoint URI, sync /opt/ml/checkpoints to S3 and get it back on a restart."""
    return spec.sagemaker is not None and (spec.sagemaker.spot or spec.sagemaker.checkpoint_s3_uri is not None)


def shipped_spec(spec: RunSpec) -> RunSpec:
    """The spec the job's container runs: the instance's accelerator, resume from its checkpoints, and local
    data files read from their input channels."""
    hardware = spec.hardware.model_copy(update={"accelerator": accelerator_of(spec.hardware.instance_type or "")})
    update = {"hardware": hardware, "resume": spec.resume or ("latest" if syncs_checkpoints(spec) else None)}
    if spec.dataset.files:  # read from their input channels (the entry script passes the channels' folder)
        files = {split: container_file(split, path) for split, path in spec.dataset.files.items()}
        update["dataset"] = spec.dataset.model_copy(update={"files": files})
    return spec.model_copy(update=update)


def script_hyperparameters(args: list[str]) -> dict[str, Any]:
    """`--name value` pairs and `--flag`s as SageMaker hyperparameters (it passes them back as `--name value`)."""
    hyperparameters: dict[str, Any] = {}
    index = 0
    while index < len(args):
        arg = args[index]
        if not arg.startswith("--") or len(arg) < 3:
            raise SageMakerSetupError(
                f"script.args item {arg!r} is not a --name; SageMaker passes a script's arguments as "
                "hyperparameters, so give them as --name value pairs or --flags"
            )
        name, _, inline = arg[2:].partition("=")
        if inline:
            hyperparameters[name], index = inline, index + 1
        elif index + 1 < len(args) and not args[index + 1].startswith("--"):
            hyperparameters[name], index = args[index + 1], index + 2
        else:
            hyperparameters[name], index = True, index + 1
    return hyperparameters


def _script_source_dir(spec: RunSpec) -> Path:
    script = Path(spec.script.path).expanduser().resolve()
    return Path(spec.script.source_dir).expanduser().resolve() if spec.script.source_dir else script.parent


def _script_entry(spec: RunSpec) -> str:
    script, source_dir = Path(spec.script.path).expanduser().resolve(), _script_source_dir(spec)
    if not script.is_relative_to(source_dir):
        raise SageMakerSetupError(
            f"script.path {spec.script.path} is not inside script.source_dir "
            f"{spec.script.source_dir}; SageMaker ships only the source directory"
        )
    return script.relative_to(source_dir).as_posix()


def _image(spec: RunSpec, instance: str) -> tuple[str | None, dict[str, str] | None, dict[str, str] | None]:
    """(explicit image URI, image lookup, Hugging Face versions) for the instance and strategy: only an image
    whose PyTorch build has kernels for the instance's GPU (nbtoolkit/gpu_builds.yaml)."""
    settings = spec.sagemaker
    gpu = _gpu(instance)
    if settings.image_uri:
        if gpu is not None:
            _check_image_uri(settings.image_uri, instance, gpu)
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
            "nbtoolkit/catalog.yaml)"
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
        else f", a build nbtoolkit/gpu_builds.yaml has no row for, so whether it has kernels for the {gpu} "
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
    """The transformers and Python releases nbtoolkit's training program needs, read from the distribution's
    own requirements (pyproject.toml), so an image older than them is refused before it bills."""
    import importlib.metadata

    transformers = next(
        found.group(1)
        for line in importlib.metadata.requires(DISTRIBUTION) or []
        if (found := re.match(r"transformers\s*>=\s*([\d.]+)\s*$", line))
    )
    python = importlib.metadata.metadata(DISTRIBUTION)["Requires-Python"].removeprefix(">=").strip()
    return {"transformers": transformers, "Python": python}


def _check_own_program_image(instance: str, image_uri: str | None, versions: dict[str, str] | None) -> None:
    """An image with a transformers or Python older than nbtoolkit's program needs would bill, then fail at import."""
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


@cache
def huggingface_training_images() -> dict[str, Any] | None:
    """The SageMaker SDK's table of Hugging Face training images (huggingface.json), read without
    importing the SDK; None when the SDK is not installed."""
    found = importlib.util.find_spec("sagemaker")
    if found is None or not found.submodule_search_locations:
        return None
    table = Path(found.submodule_search_locations[0]) / "core" / "image_uri_config" / "huggingface.json"
    return json.loads(table.read_text())["training"] if table.is_file() else None


def _check_accelerator(spec: RunSpec, instance: str) -> None:
    expected, given = accelerator_of(instance), spec.hardware.accelerator
    if given != "cpu" and given != expected:
        raise SageMakerSetupError(
            f"hardware.accelerator '{given}' does not match instance type '{instance}' "
            f"(it has {expected}); set hardware.accelerator: {expected} or pick another instance"
        )


def _check_inputs(spec: RunSpec) -> None:
    """A model folder on this machine is not in the job's container (an earlier job's is, by `job:`)."""
    if spec.model and Path(spec.model).expanduser().exists():
        raise SageMakerSetupError(
            f"model '{spec.model}' is a folder on this machine, which a SageMaker job cannot read; use a Hugging "
            "Face Hub id, an s3:// URI, or the job that trained it (model: job:NAME)"
        )


def _check_data(spec: RunSpec) -> None:
    """Local data files travel as input channels, uploaded to the job's bucket, which must be named: the SDK's
    default bucket needs a call to AWS, and what is uploaded where is said before anything starts."""
    files = spec.dataset.files or {}
    if files and not spec.sagemaker.bucket:
        raise SageMakerSetupError(
            f"dataset.files.{next(iter(files))} is a file on this machine, which a SageMaker job reads from S3; set "
            "sagemaker.bucket to a bucket the job's role can read and nbtoolkit uploads it there once"
        )
    bad = next((split for split in files if not CHANNEL_NAME.fullmatch(split)), None)
    if bad is not None:
        raise SageMakerSetupError(
            f"dataset.files split '{bad}' cannot name a SageMaker input channel; use letters, digits, '.', '-' and "
            "'_' (at most 59)"
        )


def with_data_channels(job: TrainingJob, spec: RunSpec) -> TrainingJob:
    """The job with the spec's local data files as input channels and the uploads that fill them (render's, not
    the spec check's: it hashes each file, and in the job's container the files are not where the spec says)."""
    if not spec.dataset.files:
        return job
    data = data_channels(spec.dataset.files, job.bucket or "")
    return job.model_copy(update={"input_channels": {**job.input_channels, **data.channels}, "uploads": data.uploads})


def _check_environment(environment: dict[str, str]) -> None:
    secret = next((name for name in environment if is_secret_variable(name)), None)
    if secret:
        raise SageMakerSetupError(
            f"sagemaker.environment.{secret} looks like a secret, and nbtoolkit never writes "
            "secrets into job files; keep it in AWS Secrets Manager or the role's permissions"
        )


def _check_distribution(spec: RunSpec, instance: str, image_uri: str | None, versions: dict[str, str] | None) -> None:
    strategy, parallelism = spec.parallelism.strategy, spec.parallelism
    if strategy == "deepspeed":
        raise SageMakerSetupError(
            "parallelism.strategy 'deepspeed' is not offered on SageMaker by nbtoolkit; "
            "use ddp, smddp or smp there (or run DeepSpeed with launcher deepspeed)"
        )
    if strategy in ("smddp", "smp") and spec.script is None and image_uri is None:
        raise SageMakerSetupError(OWN_PROGRAM_CANNOT[strategy].format(**own_program_needs()))
    if strategy == "smddp":
        if instance not in SMDDP_INSTANCE_TYPES:
            raise SageMakerSetupError(
                f"parallelism.strategy 'smddp' does not run on '{instance}'; SageMaker data parallel needs one of "
                f"{', '.join(SMDDP_INSTANCE_TYPES)} (or use strategy ddp on this instance)"
            )
        if versions is not None and _version(versions["pytorch_version"]) >= SMDDP_PYTORCH_BELOW:
            raise SageMakerSetupError(
                f"parallelism.strategy 'smddp' needs a Hugging Face image with PyTorch older than 2.2 "
                f"(sagemaker.pytorch_version is '{versions['pytorch_version']}'); set transformers_version '4.36.0' "
                "and pytorch_version '2.1.0' for a script of that era, give sagemaker.image_uri of an image with "
                "smdistributed-dataparallel, or use strategy ddp"
            )
    if strategy == "smp":
        _check_smp_script(spec)
        if instance not in SMP_INSTANCE_TYPES:
            raise SageMakerSetupError(
                f"parallelism.strategy 'smp' does not run on '{instance}'; SageMaker model parallel v2 needs one of "
                f"{', '.join(SMP_INSTANCE_TYPES)}"
            )
        if parallelism.pipeline_parallel_degree > 1:
            raise SageMakerSetupError(
                f"parallelism.pipeline_parallel_degree {parallelism.pipeline_parallel_degree} is not available: "
                "SageMaker model parallel v2 shards tensors, not pipeline stages; use tensor_parallel_degree"
            )


def _check_smp_script(spec: RunSpec) -> None:
    """A script that never initialises SageMaker model parallel v2 would silently train data-parallel."""
    script = Path(spec.script.path).expanduser() if spec.script is not None else None
    if script is None or not script.is_file():
        return  # nbtoolkit's own program is refused above; a missing script is preflight's sentence
    if not SMP_V2_INIT.search(script.read_text(errors="replace")):
        raise SageMakerSetupError(
            f"parallelism.strategy 'smp' needs a script that initialises SageMaker model parallel v2 "
            f"(`import torch.sagemaker as tsm`, `tsm.init()`, `tsm.transform(model)`), but {script.name} never "
            "imports torch.sagemaker, so it would train data-parallel; add those lines or use strategy ddp"
        )


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", text)[:2])
