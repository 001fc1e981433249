"""The training program against optimum-neuron 0.4.1 (Neuron SDK 2.26's) as its own wheel declares it.

The real package cannot be imported here (it needs torch-neuronx); tools/optimum_neuron_facts.py reads its wheel's
source into tests/facts/optimum-neuron-0.4.1.json, and the fake in tests/fakes is built from those facts, so a
test here fails when the program hands optimum-neuron what the real 0.4.1 would refuse at start-up.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from nbtoolkit.spec import load_spec
from nbtoolkit.train.engines import neuron_engine
from nbtoolkit.train.program import training_arguments

TESTS = Path(__file__).resolve().parent
FACTS = json.loads((TESTS / "facts" / "optimum-neuron-0.4.1.json").read_text())
GOLDEN_SPEC = TESTS / "golden" / "bert-emotion-trainium" / "spec.json"  # the tutorial's run, as launched


@pytest.fixture
def optimum_neuron_0_4_1(monkeypatch):
    """The fake optimum-neuron importable as `optimum.neuron` in this process."""
    spec = importlib.util.spec_from_file_location(
        "optimum.neuron", TESTS / "fakes" / "optimum" / "neuron" / "__init__.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setitem(
        sys.modules, "optimum", importlib.util.module_from_spec(importlib.machinery.ModuleSpec("optimum", None))
    )
    monkeypatch.setitem(sys.modules, "optimum.neuron", module)
    return module


def test_the_fake_takes_exactly_what_the_real_0_4_1_declares(optimum_neuron_0_4_1):
    import dataclasses

    from transformers import Trainer, TrainingArguments

    fields = [field.name for field in dataclasses.fields(optimum_neuron_0_4_1.NeuronTrainingArguments)]
    assert fields == FACTS["NeuronTrainingArguments"]["fields"] and len(fields) == 69
    assert FACTS["NeuronTrainingArguments"]["bases"] == []  # a dataclass of its own, as the wheel declares it
    assert not issubclass(optimum_neuron_0_4_1.NeuronTrainingArguments, TrainingArguments)
    assert FACTS["NeuronTrainer"]["init_raises_when_given_eval_dataset"].startswith("RuntimeError('Evaluation is not")
    with pytest.raises(RuntimeError, match="Evaluation is not supported in NeuronTrainer"):
        optimum_neuron_0_4_1.NeuronTrainer(model=None, eval_dataset=[1])
    assert FACTS["NeuronTrainer"]["bases"] == [] and not issubclass(optimum_neuron_0_4_1.NeuronTrainer, Trainer)
    assert "compute_metrics" not in FACTS["NeuronTrainer"]["init_parameters"]
    with pytest.raises(TypeError, match="compute_metrics"):  # what a Trainer takes and 0.4.1's does not
        optimum_neuron_0_4_1.NeuronTrainer(model=None, compute_metrics=len)


def test_the_programs_arguments_are_what_0_4_1_refuses_so_the_tutorials_run_trains_on_the_xla_trainer(
    optimum_neuron_0_4_1, tmp_path
):
    """Before: the program built NeuronTrainingArguments from its TrainingArguments keywords whenever
    optimum-neuron imported, and 0.4.1 raised TypeError at start-up, after the instance was billed."""
    spec = load_spec(GOLDEN_SPEC.read_text())
    with pytest.raises(TypeError, match="unexpected keyword argument"):  # what 0.4.1 would do with them
        training_arguments(spec, str(tmp_path), True, arguments_class=optimum_neuron_0_4_1.NeuronTrainingArguments)
    refused = {"data_seed", "fp16", "eval_on_start", "use_cpu", "torch_compile", "include_num_input_tokens_seen"}
    assert not refused & set(FACTS["NeuronTrainingArguments"]["fields"])

    engine = neuron_engine(spec)
    assert engine.trainer_class is None and engine.arguments_class is None  # transformers' own, on XLA
    assert engine.arguments["bf16"] is False and engine.prepare_model is not None  # full bf16: the cast model
    assert engine.arguments["use_cpu"] is True  # no torch-xla here: the ranks train on the CPU together
    arguments = training_arguments(
        spec, str(tmp_path), True, arguments_class=engine.arguments_class, **engine.arguments
    )
    # what the tutorial's run asks (its extra: eval_strategy no), through the arguments 0.4.1 would have refused
    assert arguments.eval_strategy == "no" and arguments.data_seed == spec.train.seed and not arguments.fp16


def test_a_machine_with_neuron_devices_but_no_torch_xla_stops_instead_of_training_on_its_cpu(monkeypatch, capsys):
    """A trn1 given an image without the Neuron stack: the chips would idle while the host's CPU trains, billed.
    Without a Neuron device (a rehearsal, the tests) the CPU trains, and the log says so."""
    import glob

    from nbtoolkit.train.engines import NEURON_DEVICES, xla_engine
    from nbtoolkit.train.errors import TrainError

    spec = load_spec({"task": "text-classification", "hardware": {"accelerator": "neuron"}})
    assert importlib.util.find_spec("torch_xla") is None  # this machine's, as a CUDA image's on trn1
    assert xla_engine(spec).arguments == {"bf16": False, "use_cpu": True}
    assert "no torch_xla and no Neuron device here: the ranks train on the CPU" in capsys.readouterr().out
    monkeypatch.setattr(glob, "glob", lambda pattern: ["/dev/neuron0"] if pattern == NEURON_DEVICES else [])
    with pytest.raises(TrainError, match=r"has Neuron devices but its Python has no torch_xla \(torch-neuronx\)"):
        xla_engine(spec)
