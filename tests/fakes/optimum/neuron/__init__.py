"""Stand-in for optimum-neuron 0.4.1 (Neuron SDK 2.26's), held to the real one: its NeuronTrainingArguments takes
exactly the fields the real 0.4.1 declares and is no TrainingArguments, and its NeuronTrainer, no Trainer either,
takes exactly the real one's __init__ parameters and refuses an eval set as it does (tests/facts/optimum-neuron-0.4.1.json, read from the real wheel by
tools/optimum_neuron_facts.py). The real package needs torch-neuronx and a Trainium device.
"""

import dataclasses
import inspect
import json
from pathlib import Path

FACTS = json.loads((Path(__file__).resolve().parents[3] / "facts" / "optimum-neuron-0.4.1.json").read_text())

__version__ = "0.4.1"

NeuronTrainingArguments = dataclasses.make_dataclass(
    "NeuronTrainingArguments",
    [(name, object, dataclasses.field(default=None)) for name in FACTS["NeuronTrainingArguments"]["fields"]],
)


INIT = inspect.Signature(
    [
        inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None)
        for name in FACTS["NeuronTrainer"]["init_parameters"]
    ]
)


class NeuronTrainer:
    def __init__(self, *args, **kwargs):
        given = INIT.bind(*args, **kwargs).arguments  # TypeError for what the real one does not take
        if given.get("eval_dataset") is not None:
            raise RuntimeError("Evaluation is not supported in NeuronTrainer.")
        self.__dict__.update(given)
