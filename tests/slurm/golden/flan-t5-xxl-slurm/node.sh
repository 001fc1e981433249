#!/usr/bin/env bash
# nbtoolkit launch (deepspeed); run from anywhere:
set -euo pipefail
cd "$(dirname "$0")"
# sbatch.sh runs this on each of the 2 node(s) with the node's rank ($SLURM_NODEID)
# run this script on each of the 2 nodes with that node's rank; node 0 is $MASTER_ADDR
NODE_RANK="${1:?usage: run.sh NODE_RANK (0 to 1; 0 on the master node)}"
export DO_NOT_TRACK=true
export HF_HUB_DISABLE_TELEMETRY=1
export MLFLOW_DISABLE_TELEMETRY=true
export OMP_NUM_THREADS=1
export PYTHONUNBUFFERED=1
export TOKENIZERS_PARALLELISM=false
export TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE='[rank${rank}]:'

# stage: train
python -m torch.distributed.run --nnodes="$SLURM_NNODES" --nproc_per_node=8 --rdzv_backend=c10d --rdzv_endpoint="$MASTER_ADDR:$MASTER_PORT" --rdzv_id="$SLURM_JOB_ID" --node_rank="$NODE_RANK" --rdzv_conf=is_host="$(( NODE_RANK == 0 ))" --log_dir=logs --tee=3 -m nbtoolkit.train --spec spec.json
