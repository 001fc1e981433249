"""A SageMaker training job as copyable Python: SDK v3 (`ModelTrainer`) and SDK v2 (`HuggingFace` estimator).

The v3 script makes the same CreateTrainingJob request nbtoolkit's own submit makes (a test runs
both against the local stand-in and compares them). The v2 script is for projects pinned to
`sagemaker<3`, written the way the Hugging Face tutorials use the estimator.
"""

from __future__ import annotations

import textwrap

from nbtoolkit.backends.sagemaker.data_channels import SHA256_METADATA
from nbtoolkit.backends.sagemaker.images import REGISTRY_PLACEHOLDER, SMP_IMAGE, no_registry_message
from nbtoolkit.backends.sagemaker.job import (
    CHECKPOINT_LOCAL_PATH,
    CODE_DIR,
    NEURON_CACHE,
    PRECOMPILE_ENV,
    TrainingJob,
)
from nbtoolkit.backends.sagemaker.settings import REGION_PLACEHOLDER
from nbtoolkit.launching.rendering import comment, python_replace
from nbtoolkit.metrics.parse import pair_pattern

V3_FILE = "sagemaker/launch_v3.py"
V2_FILE = "sagemaker/launch_v2.py"


def _literal(value) -> str:
    """A Python literal for a keyword argument; a dict gets one item per line."""
    if not isinstance(value, dict) or not value:
        return repr(value)
    return "{\n" + "".join(f"        {key!r}: {_item(item)},\n" for key, item in value.items()) + "    }"


def _item(value) -> str:
    """A value; one naming the Neuron compile cache gets the script's `neuron_cache` put in its place."""
    return (
        python_replace(value, NEURON_CACHE, "neuron_cache")
        if isinstance(value, str) and NEURON_CACHE in value
        else repr(value)
    )


def _code_lines(job: TrainingJob) -> list[str]:
    """Where the job's code is; nbtoolkit's program ships the installed package beside its spec."""
    if job.source_dir != CODE_DIR:
        return [f"code = Path({job.source_dir!r})"]
    return [
        "# nbtoolkit's training program is the job's code: the files in code/ plus the installed package and its",
        "# metadata (its backends are entry points: the container loads the spec with them)",
        "code = HERE / 'code'",
        "ship_package(code)",
    ]


def _session_lines(job: TrainingJob, session_class: str) -> list[str]:
    region = f"region_name={job.region!r}" if job.region else ""
    return [
        f"boto_session = boto3.Session({region})",
        f"session = {session_class}(boto_session=boto_session, default_bucket={job.bucket!r})",
        *_upload_lines(job),
    ]


def _upload_lines(job: TrainingJob) -> list[str]:
    """The spec's local data files uploaded as nbtoolkit's launch does: once per content, a file edited since the
    script was written refused (the key names the content it had)."""
    if not job.uploads:
        return []
    return [
        "# the spec's local data files, read by the job as input channels: each key names its content's SHA-256,",
        "# uploaded unless an object recording that hash is there already",
        "s3 = boto_session.client('s3')",
        f"for uri, path in {_literal(job.uploads)}.items():",
        "    bucket, _, key = uri.removeprefix('s3://').partition('/')",
        "    digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()",
        "    if f'/{digest}-' not in uri:",
        "        raise SystemExit(f'{path} changed since nbtoolkit wrote this script; export it again')",
        "    try:",
        f"        if s3.head_object(Bucket=bucket, Key=key)['Metadata'].get({SHA256_METADATA!r}) == digest:",
        "            continue",
        "    except s3.exceptions.ClientError:",
        "        pass",
        f"    s3.upload_file(path, bucket, key, ExtraArgs={{'Metadata': {{{SHA256_METADATA!r}: digest}}}})",
    ]


def _image_lines(job: TrainingJob, retrieve: str) -> list[str]:
    if job.image_registries:
        refusal = no_registry_message(REGION_PLACEHOLDER, job.image_registries)
        registry = "image_registries[boto_session.region_name]"
        return [
            "# the image's registry in the job's region (the account differs by region), as the SageMaker SDK's",
            "# huggingface-neuronx.json lists it",
            f"image_registries = {_literal(job.image_registries)}",
            "if boto_session.region_name not in image_registries:",
            f"    raise SystemExit({python_replace(refusal, REGION_PLACEHOLDER, 'boto_session.region_name')})",
            f"training_image = {python_replace(job.image_uri, REGISTRY_PLACEHOLDER, registry)}",
        ]
    if job.image_uri:
        return [f"training_image = {python_replace(job.image_uri, REGION_PLACEHOLDER, 'boto_session.region_name')}"]
    arguments = ", ".join(f"{key}={value!r}" for key, value in job.image_lookup.items())
    return [f"training_image = {retrieve}(region=boto_session.region_name, {arguments})"]


def _metric_lines(job: TrainingJob, make: str) -> list[str]:
    """The metric definitions as nbtoolkit builds them: its log parser's pattern, one per Trainer key."""
    keys = tuple(item["Name"] for item in job.metric_definitions)
    return [
        "# SageMaker charts these Trainer log keys, read with nbtoolkit's log-parser pattern (KEY = the key)",
        f"METRIC_PATTERN = {pair_pattern('KEY')!r}",
        textwrap.fill(f"METRIC_KEYS = ({', '.join(repr(key) for key in keys)})", 110, subsequent_indent=" " * 15),
        f"metric_definitions = [{make} for key in METRIC_KEYS]",
    ]


def _neuron_lines(job: TrainingJob) -> list[str]:
    """Where Trainium jobs keep their compile cache, and the precompile job nbtoolkit runs first."""
    lines = []
    if any(NEURON_CACHE in value for value in job.environment.values()):
        lines.append(f"neuron_cache = f's3://{{session.default_bucket()}}/{job.base_job_name}/neuron-cache'")
    if job.precompile:
        lines += [
            f"# nbtoolkit first runs this job once with environment {PRECOMPILE_ENV}",
            comment(f"(base name '{job.base_job_name}-precompile') and waits for it: it fills the compile cache."),
        ]
    return lines


def v3_script(job: TrainingJob, title: str) -> str:
    """The job with the SageMaker Python SDK v3 (`pip install 'sagemaker>=3'`)."""
    own = job.source_dir == CODE_DIR
    lines = [
        comment(f"nbtoolkit job {title!r}"),
        '"""SageMaker training job written by nbtoolkit for the SageMaker Python SDK v3.',
        "",
        "Starts the job and returns; follow it in the SageMaker console or with",
        "`nbtoolkit attach <training job name>`.",
        '"""',
        *(["import hashlib"] if job.uploads else []),
        "from pathlib import Path",
        "",
        "import boto3",
        *(["from sagemaker.core import image_uris"] if not job.image_uri else []),
        "from sagemaker.core.helper.session_helper import Session",
        "from sagemaker.train import ModelTrainer",
        (
            "from sagemaker.core.training.configs import CheckpointConfig, Compute, "
            + ("InputData, " if job.input_channels else "")
            + "MetricDefinition, SourceCode, StoppingCondition"
        ),
        "from sagemaker.train.distributed import SMP, Torchrun",
        "",
        *(["from nbtoolkit.backends.sagemaker.code import ship_package", ""] if own else []),
        "HERE = Path(__file__).resolve().parent",
        *_session_lines(job, "Session"),
        *_code_lines(job),
        *_image_lines(job, "image_uris.retrieve"),
        *_metric_lines(job, "MetricDefinition(name=key, regex=METRIC_PATTERN.replace('KEY', key))"),
        *_neuron_lines(job),
        "",
    ]
    smp = f", smp=SMP({', '.join(f'{key}={value!r}' for key, value in job.smp.items())})" if job.smp else ""
    distributed = f"Torchrun(process_count_per_node={job.processes_per_node!r}{smp})" if job.distributed else "None"
    checkpoint = f"CheckpointConfig(s3_uri={job.checkpoint_s3_uri!r})" if job.checkpoints else "None"
    lines += [
        "trainer = ModelTrainer(",
        "    sagemaker_session=session,",
        f"    role={job.role!r},",
        f"    base_job_name={job.base_job_name!r},",
        "    training_image=training_image,",
        (
            f"    source_code=SourceCode(source_dir=str(code), entry_script={job.entry_script!r}, "
            f"requirements={job.requirements!r}),"
        ),
        f"    distributed={distributed},",
        (
            f"    compute=Compute(instance_type={job.instance_type!r}, instance_count={job.instance_count}, "
            f"volume_size_in_gb={job.volume_size_gb}, enable_managed_spot_training={job.spot or None!r}),"
        ),
        (
            f"    stopping_condition=StoppingCondition(max_runtime_in_seconds={job.max_run}, "
            f"max_wait_time_in_seconds={job.max_wait!r}),"
        ),
        f"    checkpoint_config={checkpoint},",
        f"    environment={_literal(job.environment)},",
        f"    hyperparameters={_literal(job.hyperparameters)},",
        ")",
    ]
    channels = ", ".join(
        f"InputData(channel_name={name!r}, data_source={uri!r})" for name, uri in job.input_channels.items()
    )
    lines += [
        "trainer = trainer.with_metric_definitions(metric_definitions)",
        f"trainer.train(input_data_config=[{channels}], wait=False)" if channels else "trainer.train(wait=False)",
        "print(trainer._latest_training_job.training_job_name)",
    ]
    return "\n".join(lines) + "\n"


def v2_distribution(job: TrainingJob) -> dict | None:
    """The estimator's `distribution` for the job's strategy (SDK v2 vocabulary)."""
    if not job.distributed:
        return None
    if job.strategy == "smddp":
        return {"smdistributed": {"dataparallel": {"enabled": True}}}
    torchrun = {"torch_distributed": {"enabled": True}}
    if job.smp:
        return {**torchrun, "smdistributed": {"modelparallel": {"enabled": True, "parameters": job.smp}}}
    return torchrun


def v2_script(job: TrainingJob, title: str) -> str:
    """The job with the SageMaker Python SDK v2 `HuggingFace` estimator (`pip install 'sagemaker<3'`)."""
    own = job.source_dir == CODE_DIR
    if job.versions:
        image = [
            f"    transformers_version={job.versions['transformers_version']!r},",
            f"    pytorch_version={job.versions['pytorch_version']!r},",
            f"    py_version={job.versions['py_version']!r},",
        ]
        image_lines = []
    else:
        py_version = SMP_IMAGE["py_version"] if job.smp else "py310"
        image = ["    image_uri=training_image,", f"    py_version={py_version!r},"]
        image_lines = _image_lines(job, "sagemaker.image_uris.retrieve")
    spot = ["    use_spot_instances=True,", f"    max_wait={job.max_wait},"] if job.spot else []
    # SDK v2 keeps no checkpoints without a URI (v3 picks one in the session's bucket)
    uri = (
        repr(job.checkpoint_s3_uri)
        if job.checkpoint_s3_uri
        else f"f's3://{{session.default_bucket()}}/{job.base_job_name}/checkpoints'"
    )
    checkpoint = (
        [f"    checkpoint_s3_uri={uri},", f"    checkpoint_local_path={CHECKPOINT_LOCAL_PATH!r},"]
        if job.checkpoints
        else []
    )
    lines = [
        comment(f"nbtoolkit job {title!r}"),
        '"""SageMaker training job written by nbtoolkit for the SageMaker Python SDK v2',
        "(`pip install 'sagemaker<3'`) with the HuggingFace estimator; prefer launch_v3.py on SDK v3.",
        '"""',
        *(["import hashlib"] if job.uploads else []),
        "from pathlib import Path",
        "",
        "import boto3",
        "import sagemaker",
        "from sagemaker.huggingface import HuggingFace",
        "",
        *(["from nbtoolkit.backends.sagemaker.code import ship_package", ""] if own else []),
        "HERE = Path(__file__).resolve().parent",
        *_session_lines(job, "sagemaker.Session"),
        *_code_lines(job),
        *image_lines,
        *_metric_lines(job, "{'Name': key, 'Regex': METRIC_PATTERN.replace('KEY', key)}"),
        *_neuron_lines(job),
        *(
            [f"# SDK v2 starts one process per GPU; nbtoolkit asked for {job.processes_per_node} per instance"]
            if job.processes_per_node
            else []
        ),
        "",
        "estimator = HuggingFace(",
        f"    entry_point={job.entry_script!r},",
        "    source_dir=str(code),",
        f"    role={job.role!r},",
        f"    base_job_name={job.base_job_name!r},",
        f"    instance_type={job.instance_type!r},",
        f"    instance_count={job.instance_count},",
        f"    volume_size={job.volume_size_gb},",
        *image,
        f"    distribution={_literal(v2_distribution(job))},",
        f"    hyperparameters={_literal(job.hyperparameters)},",
        f"    environment={_literal(job.environment)},",
        f"    max_run={job.max_run},",
        *spot,
        *checkpoint,
        "    metric_definitions=metric_definitions,",
        "    sagemaker_session=session,",
        ")",
        f"estimator.fit(inputs={job.input_channels!r}, wait=False)"
        if job.input_channels
        else "estimator.fit(wait=False)",
        "print(estimator.latest_training_job.name)",
    ]
    return "\n".join(lines) + "\n"


def export_files(job: TrainingJob, title: str) -> dict[str, str]:
    return {V3_FILE: v3_script(job, title), V2_FILE: v2_script(job, title)}
