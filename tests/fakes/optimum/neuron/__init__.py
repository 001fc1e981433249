"""Stand-in for optimum-neuron 0.4.1 (Neuron SDK 2.26's), held to the real one: its NeuronTrainingArguments takes
exactly the fields the real 0.4.1 declares and is no TrainingArguments, and its NeuronTrainer refuses an eval set
as the real one does (tests/facts/optimum-neuron-0.4.1.json, read from the real wheel by
tools/optimum_neuron_facts.py). The real package needs torch-neuronx and a Trainium device.
"""

import dataclasses
import json
from pathlib import Path

from transformers import Trainer

FACTS = json.loads((Path(__file__).resolve().parents[3] / "facts" / "optimum-neuron-0.4.1.json").read_text())

__version__ = "0.4.1"

NeuronTrainingArguments = dataclasses.make_dataclass(
    "NeuronTrainingArguments",
    [(name, object, dataclasses.field(default=None)) for name in FACTS["NeuronTrainingArguments"]["fields"]],
)


class NeuronTrainer(Trainer):
    def __init__(self, *args, eval_dataset=None, **kwargs):
        if eval_dataset is not None:
            raise RuntimeError("Evaluation is not supported in NeuronTrainer.")
        super().__init__(*args, **kwargs)
