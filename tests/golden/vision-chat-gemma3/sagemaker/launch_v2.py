# nbtoolkit job 'vision-chat-gemma3'
"""SageMaker training job written by nbtoolkit for the SageMaker Python SDK v2
(`pip install 'sagemaker<3'`) with the HuggingFace estimator; prefer launch_v3.py on SDK v3.
"""
from pathlib import Path

import boto3
import sagemaker
from sagemaker.huggingface import HuggingFace

from nbtoolkit.backends.sagemaker.code import ship_package

HERE = Path(__file__).resolve().parent
boto_session = boto3.Session(region_name='us-east-1')
session = sagemaker.Session(boto_session=boto_session, default_bucket=None)
# nbtoolkit's training program is the job's code: the files in code/ plus the installed package and its
# metadata (its backends are entry points: the container loads the spec with them)
code = HERE / 'code'
ship_package(code)
# SageMaker charts these Trainer log keys, read with nbtoolkit's log-parser pattern (KEY = the key)
METRIC_PATTERN = '[\'"]KEY[\'"]\\s*:\\s*[\'"]?([-+]?(?:\\d+(?:\\.\\d*)?|\\.\\d+)(?:[eE][-+]?\\d+)?|nan|-?inf)[\'"]?'
METRIC_KEYS = ('loss', 'learning_rate', 'grad_norm', 'epoch', 'eval_loss', 'eval_accuracy', 'eval_f1',
               'train_runtime', 'train_samples_per_second', 'train_steps_per_second', 'train_loss')
metric_definitions = [{'Name': key, 'Regex': METRIC_PATTERN.replace('KEY', key)} for key in METRIC_KEYS]

estimator = HuggingFace(
    entry_point='nbtoolkit_train.py',
    source_dir=str(code),
    role='arn:aws:iam::111122223333:role/SageMakerExecutionRole',
    base_job_name='vision-chat-gemma3',
    instance_type='ml.g5.2xlarge',
    instance_count=1,
    volume_size=100,
    transformers_version='5.3.0',
    pytorch_version='2.9.0',
    py_version='py312',
    distribution=None,
    hyperparameters={},
    environment={
        'PYTHONUNBUFFERED': '1',
        'HF_HUB_DISABLE_TELEMETRY': '1',
        'MLFLOW_DISABLE_TELEMETRY': 'true',
        'DO_NOT_TRACK': 'true',
        'TOKENIZERS_PARALLELISM': 'false',
        'NBTOOLKIT_CHECKPOINT_DIR': '/opt/ml/checkpoints',
    },
    max_run=86400,
    metric_definitions=metric_definitions,
    sagemaker_session=session,
)
estimator.fit(wait=False)
print(estimator.latest_training_job.name)
