"""SageMaker entry point written by nbtoolkit: runs `python -m nbtoolkit.train` in the job's container."""
import os
import sys

from nbtoolkit.train.program import main

output_data = os.environ.get("SM_OUTPUT_DATA_DIR", "/opt/ml/output/data")
spec = os.environ.get("NBTOOLKIT_SPEC_FILE", "spec.json")
sys.exit(main(["--spec", os.path.join(os.path.dirname(os.path.abspath(__file__)), spec),
               "--metrics", os.path.join(output_data, "metrics.jsonl"),
               "--output-dir", os.environ.get("NBTOOLKIT_CHECKPOINT_DIR", "/opt/ml/checkpoints"),
               "--model-dir", os.environ.get("SM_MODEL_DIR", "/opt/ml/model")]))
