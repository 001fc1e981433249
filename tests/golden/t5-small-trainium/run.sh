#!/usr/bin/env bash
# nbtoolkit launch (neuron); run from anywhere:
set -euo pipefail
cd "$(dirname "$0")"
# run inside the Neuron virtualenv (e.g. source ~/aws_neuron_venv_pytorch/bin/activate)
export DO_NOT_TRACK=true
export HF_HUB_DISABLE_TELEMETRY=1
export MLFLOW_DISABLE_TELEMETRY=true
export NEURON_CC_FLAGS=--cache_dir=/var/tmp/neuron-compile-cache
export NEURON_RT_STOCHASTIC_ROUNDING_EN=1
export OMP_NUM_THREADS=1
export PYTHONUNBUFFERED=1
export TOKENIZERS_PARALLELISM=false
export TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE='[rank${rank}]:'

# stage: precompile
neuron_parallel_compile torchrun --nnodes=1 --nproc_per_node=2 --rdzv_backend=c10d --rdzv_endpoint=127.0.0.1:<port> --rdzv_id=nbtoolkit-047e43b46384 --log_dir=logs --tee=3 -m nbtoolkit.train --spec precompile/spec.json --metrics precompile/metrics.jsonl --output-dir precompile/output

# stage: train
torchrun --nnodes=1 --nproc_per_node=2 --rdzv_backend=c10d --rdzv_endpoint=127.0.0.1:<port> --rdzv_id=nbtoolkit-047e43b46384 --log_dir=logs --tee=3 -m nbtoolkit.train --spec spec.json

# stage: predict
NEURON_NUM_DEVICES=0 OMP_NUM_THREADS=4 python3 -m nbtoolkit.train.predict --spec spec.json
