"""The training program's data preparation runs once per node (the node's first process maps, the others read
its cache) with map workers from the instance's vCPUs; and on Neuron, full bf16 is the pinned SDK's mechanism."""

from __future__ import annotations

from contextlib import contextmanager

import pytest

from nbtoolkit.spec import load_spec
from nbtoolkit.train import data


class Stop(Exception):
    pass


def test_data_and_model_are_prepared_inside_the_nodes_main_process_first(monkeypatch, tmp_path):
    """Before, every rank of every run tokenized the whole dataset: 8-32 copies of the work per instance."""
    from transformers import TrainingArguments

    import nbtoolkit.train.task_setup as tasks
    from nbtoolkit.train import program

    events: list = []

    @contextmanager
    def main_process_first(self, local=True, desc="work"):
        events.append(("first", local))
        try:
            yield
        finally:
            events.append("released")

    def setup_task(spec, splits):
        events.append(("setup", sorted(splits)))
        raise Stop

    def load_splits(spec):
        events.append("download")
        return {"train": [], "eval": []}

    monkeypatch.setattr(TrainingArguments, "main_process_first", main_process_first)
    monkeypatch.setattr(data, "load_splits", load_splits)
    monkeypatch.setattr(tasks, "setup_task", setup_task)
    with pytest.raises(Stop):
        program.run(load_spec({"task": "text-classification"}), str(tmp_path / "m.jsonl"), str(tmp_path / "out"))
    assert events == [("first", True), "download", ("setup", ["eval", "train"]), "released"]


@pytest.mark.parametrize(
    ("instance", "machine_cpus", "rows", "workers"),
    [
        ("p4d.24xlarge", 96, 287_113, 96),  # the real instance: all 96 vCPUs
        ("ml.p3.16xlarge", 64, 87_599, 64),
        ("trn1.32xlarge", 128, 2_000, 2),  # never workers of under 1,000 rows each
        ("p4d.24xlarge", 2, 287_113, 2),  # a rehearsal of the p4d run on a 2-core machine
        ("p4d.24xlarge", 96, 1_500, None),  # small data: in-process
        (None, 8, 50_000, 8),  # no instance named: this machine's CPUs
    ],
)
def test_map_workers_come_from_the_instances_vcpus(monkeypatch, instance, machine_cpus, rows, workers):
    monkeypatch.setattr(data.os, "cpu_count", lambda: machine_cpus)
    hardware = {"instance_type": instance} if instance else {}
    if instance and instance.startswith("ml."):
        hardware["target"] = "sagemaker"
    spec = load_spec(
        {
            "task": "text-classification",
            "hardware": hardware,
            **(
                {"sagemaker": {"role": "arn:aws:iam::111122223333:role/sm", "region": "us-east-1"}}
                if instance and instance.startswith("ml.")
                else {}
            ),
        }
    )
    assert data.map_workers(spec, rows) == workers


def test_a_bf16_neuron_run_casts_the_model_to_bf16_not_by_xla_use_bf16():
    """XLA_USE_BF16 ended with Neuron 2.24 (our image is SDK 2.26) and the Trainer's bf16 was off: T5 trained in fp32."""
    import torch
    from transformers import T5Config, T5ForConditionalGeneration

    from nbtoolkit.backends.neuron.render import neuron_env
    from nbtoolkit.train.engines import engine_for

    spec = load_spec({"task": "summarization", "hardware": {"instance_type": "trn1.2xlarge"}, "precision": "bf16"})
    engine = engine_for(spec)  # optimum-neuron is not installed here: the plain Trainer on XLA
    assert engine.arguments["bf16"] is False  # the Trainer's own bf16 (autocast) stays off
    model = T5ForConditionalGeneration(T5Config(d_model=16, d_ff=32, num_layers=1, num_heads=2, vocab_size=64))
    assert {p.dtype for p in engine.prepare_model(model).parameters()} == {torch.bfloat16}
    env = neuron_env(spec)
    assert env["NEURON_RT_STOCHASTIC_ROUNDING_EN"] == "1" and "XLA_USE_BF16" not in env
    assert engine_for(spec.model_copy(update={"precision": "fp32"})).prepare_model is None
