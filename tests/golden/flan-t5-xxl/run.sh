#!/usr/bin/env bash
# nbtoolkit launch (deepspeed); run from anywhere:
set -euo pipefail
cd "$(dirname "$0")"
# DeepSpeed's launcher does not prefix log lines by rank (torchrun, the default, does)
export DO_NOT_TRACK=true
export HF_HUB_DISABLE_TELEMETRY=1
export MLFLOW_DISABLE_TELEMETRY=true
export OMP_NUM_THREADS=1
export PYTHONUNBUFFERED=1
export TOKENIZERS_PARALLELISM=false

# stage: train
python -m deepspeed.launcher.runner --num_gpus=8 --master_port=<port> --module nbtoolkit.train --spec spec.json
