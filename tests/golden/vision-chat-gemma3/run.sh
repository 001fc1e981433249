#!/usr/bin/env bash
# nbtoolkit launch (sagemaker); run from anywhere:
set -euo pipefail
cd "$(dirname "$0")"
# needs AWS credentials (boto3's usual chain) and pip install 'nbtoolkit-finetune[sagemaker]'
# the same job as SageMaker SDK code: sagemaker/launch_v3.py (v3) and sagemaker/launch_v2.py (v2)
export PYTHONUNBUFFERED=1

# stage: train
python -m nbtoolkit.backends.sagemaker.follow --job sagemaker/job.json
