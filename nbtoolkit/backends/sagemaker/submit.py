"""Starting a SageMaker training job with the SageMaker Python SDK v3 (imported here, and only here).

boto3's normal credential chain supplies the credentials; nothing secret is read or written by
nbtoolkit. Failures become one sentence (aws_errors.explain) raised as SubmitError.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from nbtoolkit.backends.sagemaker.aws_errors import NO_REGION, SageMakerSetupError, explain
from nbtoolkit.backends.sagemaker.code import ship_package
from nbtoolkit.backends.sagemaker.data_channels import DataChanged, upload
from nbtoolkit.backends.sagemaker.images import regional_image
from nbtoolkit.backends.sagemaker.job import CODE_DIR, NEURON_CACHE, TrainingJob
from nbtoolkit.metrics.cost import BILLED_SINCE_ENV

#: what uploading the spec's local data files takes
UPLOAD_PERMISSIONS = "s3:PutObject (and s3:GetObject, s3:ListBucket to find files already there) on sagemaker.bucket"


class SubmitError(RuntimeError):
    """SageMaker did not start the job; the message says why in one sentence."""


def stage_code(job: TrainingJob, job_dir: Path) -> Path:
    """The directory shipped as the job's code; for nbtoolkit's program, its files plus the installed package and
    its metadata (nbtoolkit.backends.sagemaker.code)."""
    source_dir = Path(job.source_dir) if Path(job.source_dir).is_absolute() else job_dir / job.source_dir
    if job.source_dir == CODE_DIR:
        ship_package(source_dir)
    return source_dir


def boto_session(region: str | None):
    """A boto3 session on the normal credential chain, in the given (or configured) region."""
    import boto3

    session = boto3.Session(region_name=region) if region else boto3.Session()
    if session.region_name is None:
        raise SubmitError(NO_REGION)
    return session


def image_uri(job: TrainingJob, region: str) -> str:
    """The training image: the spec's (or the Trainium default, from its region's registry) as given, else looked
    up in the SDK's tables."""
    if job.image_uri:
        try:
            return regional_image(job.image_uri, job.image_registries, region)
        except SageMakerSetupError as exc:
            raise SubmitError(str(exc)) from None
    from sagemaker.core import image_uris

    try:
        return image_uris.retrieve(region=region, **job.image_lookup)
    except ValueError as exc:
        lookup = job.image_lookup
        raise SubmitError(
            f"the SageMaker SDK has no {lookup['framework']} training image for version "
            f"{lookup['version']} ({lookup.get('base_framework_version', lookup['py_version'])}) "
            f"on {lookup['instance_type']}: {str(exc).split('. ')[0]}; set sagemaker.transformers_version "
            "and pytorch_version to a listed pair, or give sagemaker.image_uri"
        ) from None


def model_trainer(job: TrainingJob, source_dir: Path, session, training_image: str):
    """The SDK v3 ModelTrainer for the job (the same calls `nbtoolkit launch-files` writes out)."""
    from sagemaker.core.training.configs import (
        CheckpointConfig,
        Compute,
        MetricDefinition,
        SourceCode,
        StoppingCondition,
    )
    from sagemaker.train import ModelTrainer
    from sagemaker.train.distributed import SMP, Torchrun

    distributed = None
    if job.distributed:
        distributed = Torchrun(process_count_per_node=job.processes_per_node, smp=SMP(**job.smp) if job.smp else None)
    trainer = ModelTrainer(
        sagemaker_session=session,
        role=job.role,
        base_job_name=job.base_job_name,
        training_image=training_image,
        source_code=SourceCode(
            source_dir=str(source_dir), entry_script=job.entry_script, requirements=job.requirements
        ),
        distributed=distributed,
        compute=Compute(
            instance_type=job.instance_type,
            instance_count=job.instance_count,
            volume_size_in_gb=job.volume_size_gb,
            enable_managed_spot_training=job.spot or None,
        ),
        stopping_condition=StoppingCondition(max_runtime_in_seconds=job.max_run, max_wait_time_in_seconds=job.max_wait),
        checkpoint_config=CheckpointConfig(s3_uri=job.checkpoint_s3_uri) if job.checkpoints else None,
        environment=job.environment,
        hyperparameters=job.hyperparameters,
    )
    if job.metric_definitions:
        trainer = trainer.with_metric_definitions(
            [MetricDefinition(name=item["Name"], regex=item["Regex"]) for item in job.metric_definitions]
        )
    return trainer


def input_data(job: TrainingJob) -> list:
    """The job's input channels (an earlier job's model) as the SDK takes them; SageMaker copies each in."""
    from sagemaker.core.training.configs import InputData

    return [InputData(channel_name=name, data_source=uri) for name, uri in job.input_channels.items()]


def submit(job: TrainingJob, job_dir: Path, say=print) -> tuple[str, str]:
    """Upload local data files not yet in the bucket, stage the code, create the training job without waiting;
    returns (training job name, region)."""
    logging.getLogger("sagemaker").setLevel(logging.WARNING)
    boto = boto_session(job.region)
    training_image = image_uri(job, boto.region_name)  # an image the region lacks is refused before any upload
    if job.uploads:
        try:
            upload(job.uploads, boto.client("s3"), say)
        except DataChanged as exc:
            raise SubmitError(str(exc)) from None
        except Exception as exc:  # botocore raises many kinds; each becomes one sentence
            raise SubmitError(explain(exc, action="upload dataset.files to S3", needs=UPLOAD_PERMISSIONS)) from exc
    try:
        from sagemaker.core.helper.session_helper import Session

        session = Session(boto_session=boto, default_bucket=job.bucket)
        if any(NEURON_CACHE in value for value in job.environment.values()):  # both Neuron jobs share it
            cache = f"s3://{session.default_bucket()}/{job.base_job_name.removesuffix('-precompile')}/neuron-cache"
            job = job.model_copy(
                update={
                    "environment": {key: value.replace(NEURON_CACHE, cache) for key, value in job.environment.items()}
                }
            )
        # billing starts once SageMaker starts the job, after this request: the program's budget counts from here,
        # so the container's start-up (image, pip, imports) counts against it as it does on the bill
        job = job.model_copy(update={"environment": {**job.environment, BILLED_SINCE_ENV: repr(time.time())}})
        trainer = model_trainer(job, stage_code(job, job_dir), session, training_image)
        trainer.train(input_data_config=input_data(job) or None, wait=False, logs=False)
    except SubmitError:
        raise
    except Exception as exc:  # the SDK and botocore raise many kinds; each becomes one sentence
        raise SubmitError(explain(exc, action="start the training job", role=job.role)) from exc
    return trainer._latest_training_job.training_job_name, boto.region_name
