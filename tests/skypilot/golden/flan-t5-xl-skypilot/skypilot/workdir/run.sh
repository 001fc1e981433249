#!/usr/bin/env bash
# nbtoolkit launch (deepspeed); run from anywhere:
set -euo pipefail
cd "$(dirname "$0")"
# DeepSpeed's launcher does not prefix log lines by rank (torchrun, the default, does)
# run this script on each of the 2 nodes with that node's rank; node 0 is $MASTER_ADDR
NODE_RANK="${1:?usage: run.sh NODE_RANK (0 to 1; 0 on the master node)}"
export DO_NOT_TRACK=true
export HF_HUB_DISABLE_TELEMETRY=1
export MLFLOW_DISABLE_TELEMETRY=true
export OMP_NUM_THREADS=1
export PYTHONUNBUFFERED=1
export TOKENIZERS_PARALLELISM=false

# stage: train
python -m deepspeed.launcher.runner --hostfile=hostfile --no_ssh --node_rank="$NODE_RANK" --master_addr="$MASTER_ADDR" --num_gpus="$SKYPILOT_NUM_GPUS_PER_NODE" --master_port=<port> --module nbtoolkit.train --spec spec.json
