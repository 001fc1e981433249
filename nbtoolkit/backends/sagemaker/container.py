"""What a SageMaker job's container runs of nbtoolkit's own program: the entry script, the requirements it adds
to the Hugging Face image, and the code folder's files (the package itself is copied in at submit)."""

from __future__ import annotations

from nbtoolkit.backends.neuron.render import precompile_spec
from nbtoolkit.backends.sagemaker.instances import accelerator_of
from nbtoolkit.backends.sagemaker.job import (
    CHECKPOINT_DIR_ENV,
    CHECKPOINT_LOCAL_PATH,
    CODE_DIR,
    ENTRY_SCRIPT,
    MODEL_CHANNEL,
    PRECOMPILE_SPEC_FILE,
    REQUIREMENTS,
    SPEC_FILE_ENV,
    shipped_spec,
)
from nbtoolkit.launching.image_pins import container_pins
from nbtoolkit.launching.runtime import ERROR_PREFIX, SPEC_FILE
from nbtoolkit.spec import RunSpec
from nbtoolkit.tasks import TASKS
from nbtoolkit.train.supported_versions import container_requirements

#: The entry script SageMaker runs (under torchrun for distributed jobs): nbtoolkit's program with
#: SageMaker's directories. Hyperparameter arguments SageMaker appends are not for it and are ignored.
ENTRY_SOURCE = f'''"""SageMaker entry point written by nbtoolkit: runs `python -m nbtoolkit.train` in the job's container."""
import fcntl
import os
import sys
import tarfile

from nbtoolkit.train.program import main

output_data = os.environ.get("SM_OUTPUT_DATA_DIR", "/opt/ml/output/data")
spec = os.environ.get("{SPEC_FILE_ENV}", "{SPEC_FILE}")
model = os.environ.get("SM_CHANNEL_{MODEL_CHANNEL.upper()}")  # an earlier job's model.tar.gz, copied in by SageMaker
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
                print(f"{ERROR_PREFIX} the earlier job's model in input channel '{MODEL_CHANNEL}' did not unpack: "
                      f"{{exc}}", file=sys.stderr, flush=True)
                sys.exit(2)
            os.remove(archive)
# the input channels' folder: local dataset.files were uploaded as channels, the spec names them below it
data_dir = os.path.join(os.environ.get("SM_INPUT_DIR", "/opt/ml/input"), "data")
sys.exit(main(["--spec", os.path.join(os.path.dirname(os.path.abspath(__file__)), spec),
               "--metrics", os.path.join(output_data, "metrics.jsonl"),
               "--output-dir", os.environ.get("{CHECKPOINT_DIR_ENV}", "{CHECKPOINT_LOCAL_PATH}"),
               "--model-dir", os.environ.get("SM_MODEL_DIR", "/opt/ml/model"),
               "--data-dir", data_dir,
               *(["--model", model] if model else [])]))
'''


def code_files(spec: RunSpec, image: str) -> dict[str, str]:
    """Files of the job's code directory that nbtoolkit writes (the package itself is copied at submit); `image` is
    the training image the job runs, whose lock (nbtoolkit.launching.image_pins) says what requirements.txt pins."""
    if spec.script is not None:
        return {}
    shipped = shipped_spec(spec)
    neuron = accelerator_of(spec.hardware.instance_type or "") == "neuron"
    requires = TASKS[spec.task].requires
    files = {
        f"{CODE_DIR}/{SPEC_FILE}": shipped.model_dump_json(indent=2),
        f"{CODE_DIR}/{ENTRY_SCRIPT}": ENTRY_SOURCE,
        f"{CODE_DIR}/{REQUIREMENTS}": "".join(
            f"{line}\n"
            for line in container_requirements(
                spec.extras_used,
                keep_image_stack=neuron,
                task_requires=requires,
                pins=container_pins(image, neuron, spec.extras_used, requires),
            )
        ),
    }
    if neuron and spec.neuron.precompile:
        files[f"{CODE_DIR}/{PRECOMPILE_SPEC_FILE}"] = precompile_spec(shipped).model_dump_json(indent=2)
    return files
