"""preference: DPO, ORPO, SimPO or KTO (TRL) on prompt/chosen/rejected pairs."""

from nbtoolkit.tasks import Task, TaskWorkload
from nbtoolkit.tasks.chat import CHAT_MODEL

TASK = Task(
    "preference",
    {},
    program="nbtoolkit.tasks.preference.train",
    **CHAT_MODEL,
    row_columns=("prompt", "chosen", "rejected"),
    sequences_per_sample=2,
    workload="nbtoolkit.tasks.preference:workload",
    set_by_field={
        "max_length": "dataset.max_length",
        "beta": "preference.beta",
        "loss_type": "preference.loss_type",
    },
    block="preference",
    listed=60,
)


def workload(spec) -> TaskWorkload:
    """DPO and KTO score every sequence with a frozen reference model too; ORPO and SimPO have none."""
    return TaskWorkload(reference_model=spec.preference is None or spec.preference.method in ("dpo", "kto"))
