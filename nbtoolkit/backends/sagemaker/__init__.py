"""The `sagemaker` backend: a SageMaker training job, submitted and followed by a detached follower.

`job` turns a spec into the training-job description (pure), `container` writes what its container runs of
nbtoolkit's program (entry script, requirements), `export` writes the job as copyable SDK v3 and v2 code,
`model_data` reads a finished job's model.tar.gz, `submit` starts it with the SageMaker SDK, `follow` is the program a job's
supervisor runs to submit, follow and stop it, and `standin` is the local AWS stand-in the tests
and the SageMaker notebook run against. `render` is pure: its Launch's stage runs the follower,
with the job's code files and description (`sagemaker/job.json`). `preflight` checks, before
anything is sent, what this machine can check: the SDK is installed, credentials and a region are
found, and SageMaker offers the instance type. Importing this package loads nothing from AWS.
"""

from nbtoolkit.backends import Backend
from nbtoolkit.backends.sagemaker.settings import SageMakerSpec

backend = Backend(name="sagemaker", implementation=f"{__name__}.render", target="sagemaker", block=SageMakerSpec)
