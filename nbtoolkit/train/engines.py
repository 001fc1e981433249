"""What the run's engine changes in the Trainer setup: DeepSpeed's config, optimum-neuron's trainer."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from nbtoolkit.runtime import DEEPSPEED_CONFIG_FILE
from nbtoolkit.spec import RunSpec


@dataclass
class Engine:
    trainer_class: type | None = None  # default: the task's, else transformers.Trainer
    arguments_class: type | None = None  # default: transformers.TrainingArguments
    arguments: dict[str, Any] = field(default_factory=dict)


def is_local_main() -> bool:
    """The first process on this node (or the only one)."""
    return os.environ.get("LOCAL_RANK", "0") == "0"


def engine_for(spec: RunSpec) -> Engine:
    if spec.parallelism.strategy == "deepspeed":
        from nbtoolkit.train.deepspeed_ops import announce_op_builds

        if is_local_main():
            announce_op_builds(DEEPSPEED_CONFIG_FILE)
        return Engine(arguments={"deepspeed": DEEPSPEED_CONFIG_FILE})
    if spec.hardware.accelerator == "neuron":
        return neuron_engine()
    return Engine()


def neuron_engine() -> Engine:
    """optimum-neuron's NeuronTrainer when installed (the BERT-on-trn1 tutorial's, with bf16 from the
    arguments); else the plain Trainer on XLA, where XLA_USE_BF16=1 casts to bf16 (the T5 tutorial's)."""
    try:
        from optimum.neuron import NeuronTrainer, NeuronTrainingArguments
    except ImportError:
        return Engine(arguments={"bf16": False})
    if is_local_main():
        print("[nbtoolkit] optimum-neuron is installed: training with its NeuronTrainer", flush=True)
    return Engine(trainer_class=NeuronTrainer, arguments_class=NeuronTrainingArguments)
