"""What SageMaker jobs need to know about instance types beyond the catalog: validity, accelerator,
which ones run SageMaker's distributed libraries. (Prices come from nbtoolkit.hardware.catalog.)

Validity comes from the SageMaker API model that botocore ships (its TrainingInstanceType enum),
so it follows the service without a list of our own. Which instances run SageMaker's distributed
libraries comes from the AWS Developer Guide:
https://docs.aws.amazon.com/sagemaker/latest/dg/distributed-data-parallel-support.html and
https://docs.aws.amazon.com/sagemaker/latest/dg/distributed-model-parallel-support-v2.html
"""

from __future__ import annotations

import difflib
from functools import cache
from typing import Literal

Accelerator = Literal["cpu", "cuda", "neuron"]

#: SageMaker data parallel (smddp) runs on these only
SMDDP_INSTANCE_TYPES = (
    "ml.p3dn.24xlarge",
    "ml.p4d.24xlarge",
    "ml.p4de.24xlarge",
    "ml.p5.48xlarge",
    "ml.p5e.48xlarge",
    "ml.p5en.48xlarge",
)
#: SageMaker model parallel v2 (smp) runs on these only
SMP_INSTANCE_TYPES = ("ml.p4d.24xlarge", "ml.p4de.24xlarge", "ml.p5.48xlarge", "ml.p5e.48xlarge", "ml.p5en.48xlarge")


def accelerator_of(instance_type: str) -> Accelerator:
    """What a SageMaker instance trains on: ml.p*/ml.g* GPUs, ml.trn*/ml.inf* NeuronCores, else CPU."""
    family = instance_type.removeprefix("ml.").split(".")[0]
    if family.startswith(("trn", "inf")):
        return "neuron"
    if family.startswith(("p", "g")):
        return "cuda"
    return "cpu"


@cache
def training_instance_types() -> tuple[str, ...]:
    """Every instance type CreateTrainingJob accepts, from botocore's SageMaker service model."""
    import botocore.session

    model = botocore.session.get_session().get_service_model("sagemaker")
    return tuple(model.shape_for("TrainingInstanceType").enum)


def unknown_instance_message(instance_type: str) -> str | None:
    """The sentence for an instance type SageMaker training does not offer, or None if it does."""
    known = training_instance_types()
    if instance_type in known:
        return None
    close = difflib.get_close_matches(instance_type, known, n=3, cutoff=0.6)
    hint = f"did you mean {', '.join(close)}?" if close else "e.g. ml.g5.2xlarge or ml.p4d.24xlarge"
    return f"hardware.instance_type '{instance_type}' is not a SageMaker training instance type; {hint}"
