#!/usr/bin/env bash
# nbtoolkit launch (slurm); run from anywhere:
set -euo pipefail
cd "$(dirname "$0")"
# submitted with `sbatch sbatch.sh` and followed by nbtoolkit.backends.slurm.follow; node.sh is what each node runs
# the job folder and this Python environment must be on a filesystem every node sees, at the same paths
# a requeued job resumes from its last checkpoint in output/
export PYTHONUNBUFFERED=1

# stage: train
python -m nbtoolkit.backends.slurm.follow --script sbatch.sh
