# nbtoolkit job 'vision-chat-gemma3'
"""SageMaker training job written by nbtoolkit for the SageMaker Python SDK v3.

Starts the job and returns; follow it in the SageMaker console or with
`nbtoolkit attach <training job name>`.
"""
from pathlib import Path

import boto3
from sagemaker.core import image_uris
from sagemaker.core.helper.session_helper import Session
from sagemaker.train import ModelTrainer
from sagemaker.core.training.configs import CheckpointConfig, Compute, MetricDefinition, SourceCode, StoppingCondition
from sagemaker.train.distributed import SMP, Torchrun

from nbtoolkit.backends.sagemaker.code import ship_package

HERE = Path(__file__).resolve().parent
boto_session = boto3.Session(region_name='us-east-1')
session = Session(boto_session=boto_session, default_bucket=None)
# nbtoolkit's training program is the job's code: the files in code/ plus the installed package and its
# metadata (its backends are entry points: the container loads the spec with them)
code = HERE / 'code'
ship_package(code)
training_image = image_uris.retrieve(region=boto_session.region_name, framework='huggingface', version='5.3.0', base_framework_version='pytorch2.9.0', py_version='py312', image_scope='training', instance_type='ml.g5.2xlarge')
# SageMaker charts these Trainer log keys, read with nbtoolkit's log-parser pattern (KEY = the key)
METRIC_PATTERN = '[\'"]KEY[\'"]\\s*:\\s*[\'"]?([-+]?(?:\\d+(?:\\.\\d*)?|\\.\\d+)(?:[eE][-+]?\\d+)?|nan|-?inf)[\'"]?'
METRIC_KEYS = ('loss', 'learning_rate', 'grad_norm', 'epoch', 'eval_loss', 'eval_accuracy', 'eval_f1',
               'train_runtime', 'train_samples_per_second', 'train_steps_per_second', 'train_loss')
metric_definitions = [MetricDefinition(name=key, regex=METRIC_PATTERN.replace('KEY', key)) for key in METRIC_KEYS]

trainer = ModelTrainer(
    sagemaker_session=session,
    role='arn:aws:iam::111122223333:role/SageMakerExecutionRole',
    base_job_name='vision-chat-gemma3',
    training_image=training_image,
    source_code=SourceCode(source_dir=str(code), entry_script='nbtoolkit_train.py', requirements='requirements.txt'),
    distributed=None,
    compute=Compute(instance_type='ml.g5.2xlarge', instance_count=1, volume_size_in_gb=100, enable_managed_spot_training=None),
    stopping_condition=StoppingCondition(max_runtime_in_seconds=86400, max_wait_time_in_seconds=None),
    checkpoint_config=None,
    environment={
        'PYTHONUNBUFFERED': '1',
        'HF_HUB_DISABLE_TELEMETRY': '1',
        'MLFLOW_DISABLE_TELEMETRY': 'true',
        'DO_NOT_TRACK': 'true',
        'TOKENIZERS_PARALLELISM': 'false',
        'NBTOOLKIT_CHECKPOINT_DIR': '/opt/ml/checkpoints',
    },
    hyperparameters={},
)
trainer = trainer.with_metric_definitions(metric_definitions)
trainer.train(wait=False)
print(trainer._latest_training_job.training_job_name)
