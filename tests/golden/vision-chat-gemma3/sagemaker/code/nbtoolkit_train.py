"""SageMaker entry point written by nbtoolkit: runs `python -m nbtoolkit.train` in the job's container."""
import fcntl
import os
import sys
import tarfile

from nbtoolkit.train.program import main

output_data = os.environ.get("SM_OUTPUT_DATA_DIR", "/opt/ml/output/data")
spec = os.environ.get("NBTOOLKIT_SPEC_FILE", "spec.json")
model = os.environ.get("SM_CHANNEL_MODEL")  # an earlier job's model.tar.gz, copied in by SageMaker
if model:
    archive = os.path.join(model, "model.tar.gz")
    with open(os.path.join(model, ".unpack.lock"), "w") as lock:  # every process of the node runs this script
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.isfile(archive):
            try:
                with tarfile.open(archive) as tar:
                    # plain files and folders inside the channel only (a Python before 3.10.12 has no filter)
                    members = tar.getmembers()
                    if any(not (m.isfile() or m.isdir()) or m.name.startswith("/") or ".." in m.name.split("/")
                           for m in members):
                        raise tarfile.TarError("it holds a link or a path outside the model folder")
                    tar.extractall(model, members)
            except (tarfile.TarError, OSError) as exc:
                print(f"[nbtoolkit] error: the earlier job's model in input channel 'model' did not unpack: "
                      f"{exc}", file=sys.stderr, flush=True)
                sys.exit(2)
            os.remove(archive)
# the input channels' folder: local dataset.files were uploaded as channels, the spec names them below it
data_dir = os.path.join(os.environ.get("SM_INPUT_DIR", "/opt/ml/input"), "data")
sys.exit(main(["--spec", os.path.join(os.path.dirname(os.path.abspath(__file__)), spec),
               "--metrics", os.path.join(output_data, "metrics.jsonl"),
               "--output-dir", os.environ.get("NBTOOLKIT_CHECKPOINT_DIR", "/opt/ml/checkpoints"),
               "--model-dir", os.environ.get("SM_MODEL_DIR", "/opt/ml/model"),
               "--data-dir", data_dir,
               *(["--model", model] if model else [])]))
