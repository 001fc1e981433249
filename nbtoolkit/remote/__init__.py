"""Remote training services: jobs that run elsewhere (SageMaker) and are followed from here.

`sagemaker_job` turns a spec into a training-job description (pure), `sagemaker_export` writes it
as copyable SDK code, `sagemaker_submit` starts it with the SageMaker SDK, `sagemaker_follow` is the
program a job's supervisor runs to submit, follow and stop it. Importing this package loads nothing
from AWS; the SDK is imported inside the functions that need it.
"""
