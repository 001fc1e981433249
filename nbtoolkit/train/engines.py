"""What the run's engine changes in the Trainer setup: DeepSpeed's config, optimum-neuron's trainer."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from nbtoolkit.launching.runtime import DEEPSPEED_CONFIG_FILE
from nbtoolkit.spec import RunSpec
from nbtoolkit.train.errors import TrainError


@dataclass
class Engine:
    trainer_class: type | None = None  # default: the task's, else transformers.Trainer
    arguments_class: type | None = None  # default: transformers.TrainingArguments
    arguments: dict[str, Any] = field(default_factory=dict)
    #: applied to the model before the Trainer gets it (e.g. the cast of a full-bf16 Neuron run)
    prepare_model: Callable[[Any], Any] | None = None


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
        return neuron_engine(spec)
    return Engine()


def neuron_engine(spec: RunSpec) -> Engine:
    """optimum-neuron's NeuronTrainer where its arguments are a TrainingArguments (before 0.4: the BERT-on-trn1
    tutorial's, with bf16 from the arguments); else the plain Trainer on XLA (the T5 tutorial's).

    optimum-neuron 0.4 (0.4.1 is Neuron SDK 2.26's) made NeuronTrainingArguments a dataclass of its own, which takes
    none of data_seed, fp16, eval_on_start, use_cpu, torch_compile or include_num_input_tokens_seen, and a
    NeuronTrainer that refuses an eval set (tests/facts/optimum-neuron-0.4.1.json, read from its wheel): with it,
    the run would stop at start-up, billed. Full bf16 on the plain Trainer is the pinned SDK's documented
    mechanism: the model cast to bfloat16, with stochastic rounding on (the backend sets
    NEURON_RT_STOCHASTIC_ROUNDING_EN=1); XLA_USE_BF16, which the tutorial used, ended with Neuron 2.24. The
    Trainer's own bf16 (CUDA/CPU autocast) stays off.
    """
    try:
        from optimum.neuron import NeuronTrainer, NeuronTrainingArguments
    except ImportError:
        return xla_engine(spec)
    from transformers import TrainingArguments

    if not issubclass(NeuronTrainingArguments, TrainingArguments):
        if is_local_main():
            print(
                "[nbtoolkit] this optimum-neuron's NeuronTrainingArguments is not a TrainingArguments (0.4 and "
                "later): training with the Trainer on XLA",
                flush=True,
            )
        return xla_engine(spec)
    if is_local_main():
        print("[nbtoolkit] optimum-neuron is installed: training with its NeuronTrainer", flush=True)
    return Engine(trainer_class=NeuronTrainer, arguments_class=NeuronTrainingArguments)


#: what the Neuron driver makes of each device of a machine with Trainium or Inferentia chips
NEURON_DEVICES = "/dev/neuron*"


def xla_engine(spec: RunSpec) -> Engine:
    """transformers' own Trainer on XLA: full bf16 as the model cast to bfloat16. Where torch-xla is missing on a
    machine without Neuron devices (a Neuron run rehearsed or tested on a CPU machine) the ranks train on the CPU,
    together (gloo), not each alone, and say so; on a machine with Neuron devices that would be the billed chips
    idle while the CPU trains, so the run stops at start-up in one sentence."""
    import glob
    import importlib.util

    arguments: dict[str, Any] = {"bf16": False}
    if importlib.util.find_spec("torch_xla") is None:
        if glob.glob(NEURON_DEVICES):
            raise TrainError(
                "this machine has Neuron devices but its Python has no torch_xla (torch-neuronx), so the run would "
                "train on the CPU while the Trainium chips idle; use the Neuron SDK's image or environment "
                "(docs/launchers.md)"
            )
        if is_local_main():
            print("[nbtoolkit] no torch_xla and no Neuron device here: the ranks train on the CPU", flush=True)
        arguments["use_cpu"] = True
    return Engine(arguments=arguments, prepare_model=bf16_model if spec.precision == "bf16" else None)


def bf16_model(model: Any) -> Any:
    import torch

    return model.to(torch.bfloat16)
