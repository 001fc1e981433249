#!/usr/bin/env bash
#SBATCH --job-name=flan-t5-xxl-cnn-slurm
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --gpus-per-node=8
#SBATCH --partition=gpu
#SBATCH --time=2-00:00:00
#SBATCH --account=nlp-lab
#SBATCH --requeue
#SBATCH --open-mode=append
#SBATCH --output=slurm-%j.out
# nbtoolkit launch (slurm): `sbatch sbatch.sh` in this folder submits it
# submitted with `sbatch sbatch.sh` and followed by nbtoolkit.backends.slurm.follow; node.sh is what each node runs
# the job folder and this Python environment must be on a filesystem every node sees, at the same paths
# a requeued job resumes from its last checkpoint in output/
set -euo pipefail
# the allocation's first node hosts the rendezvous
MASTER_ADDR="$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n1)"
MASTER_PORT=$(( 20000 + SLURM_JOB_ID % 20000 ))
export MASTER_ADDR MASTER_PORT
echo "[nbtoolkit] slurm: job $SLURM_JOB_ID on $SLURM_JOB_NUM_NODES node(s) ($SLURM_JOB_NODELIST), rendezvous $MASTER_ADDR:$MASTER_PORT, restart ${SLURM_RESTART_COUNT:-0}"
srun --ntasks-per-node=1 --kill-on-bad-exit=1 bash -c 'exec bash node.sh "$SLURM_NODEID"'
