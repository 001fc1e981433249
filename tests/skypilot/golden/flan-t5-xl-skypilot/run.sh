#!/usr/bin/env bash
# nbtoolkit launch (skypilot); run from anywhere:
set -euo pipefail
cd "$(dirname "$0")"
# needs SkyPilot with an enabled cloud (sky check); by hand: cd to this folder and run sky jobs launch skypilot/task.yaml
export PYTHONUNBUFFERED=1

# stage: train
python -m nbtoolkit.backends.skypilot.follow --task skypilot/task.yaml
