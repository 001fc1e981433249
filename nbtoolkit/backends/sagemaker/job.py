"""A SageMaker training job described from a spec: pure data, no SDK, no network.

One description, three uses: the follower submits it (sagemaker_submit), `nbtoolkit launch-files`
writes it as copyable SDK code (sagemaker_export), and the job directory keeps it as
`sagemaker/job.json`. Every rule that can be checked without AWS is checked here, with the
sentence the user reads.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from nbtoolkit.backends.neuron.render import neuron_env
from nbtoolkit.backends.program import BASE_ENV
from nbtoolkit.backends.sagemaker.aws_errors import SageMakerSetupError
from nbtoolkit.backends.sagemaker.data_channels import CHANNEL_NAME, container_file, data_channels
from nbtoolkit.backends.sagemaker.images import (
    REGISTRY_PLACEHOLDER,
    check_own_program_image,
    own_program_needs,
    regional_registry,
    training_image,
    trainium_registries,
)
from nbtoolkit.backends.sagemaker.instances import (
    SMDDP_INSTANCE_TYPES,
    SMP_INSTANCE_TYPES,
    accelerator_of,
)
from nbtoolkit.inputs.data_files import files_not_shipped
from nbtoolkit.launching.credentials import is_secret_variable
from nbtoolkit.metrics.parse import pair_pattern
from nbtoolkit.spec import RunSpec

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
REQUIREMENTS = "requirements.txt"
#: where the training program keeps checkpoints in the container; synced to S3 when configured
CHECKPOINT_LOCAL_PATH = "/opt/ml/checkpoints"
CHECKPOINT_DIR_ENV = "NBTOOLKIT_CHECKPOINT_DIR"
#: the input channel an earlier job's model (`model: s3://.../model.tar.gz`, what `model: job:ID` resolves to)
#: arrives in: SageMaker copies it to /opt/ml/input/data/model and names that folder in SM_CHANNEL_MODEL
MODEL_CHANNEL = "model"

#: how a script starts SageMaker model parallel v2 (torch.sagemaker); SMP v1's smdistributed.modelparallel
#: does not run on the v2 image
SMP_V2_INIT = re.compile(
    r"^\s*(import\s+torch\.sagemaker\b|from\s+torch\.sagemaker\b|from\s+torch\s+import\s+sagemaker\b)", re.MULTILINE
)
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
    #: region -> ECR registry host, for an image_uri holding `{registry}` (the Trainium image: its account differs
    #: by region, as the SDK's huggingface-neuronx.json lists)
    image_registries: dict[str, str] = {}
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
    image_uri, image_lookup, versions = training_image(spec, instance)
    image_registries = trainium_registries() if REGISTRY_PLACEHOLDER in (image_uri or "") else {}
    if image_registries and settings.region is not None:
        regional_registry(image_registries, settings.region)  # a region without the image is refused now
    _check_distribution(spec, instance, image_uri, versions)
    if spec.script is None:
        check_own_program_image(instance, image_uri, versions)
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
        image_registries=image_registries,
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
    unshipped = files_not_shipped(spec, "SageMaker")
    if unshipped:
        raise SageMakerSetupError(unshipped)
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
