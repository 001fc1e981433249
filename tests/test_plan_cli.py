"""`nbtoolkit plan SPEC [--json]` and `nbtoolkit run --force`: the planner from a terminal."""

from __future__ import annotations

import json

import yaml

from nbtoolkit.cli import main
from nbtoolkit.planner.report import row_spec
from nbtoolkit.runner import JobStore, stop


def write(tmp_path, spec: dict):
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    return str(path)


def test_plan_json_is_one_object(tmp_path, capsys, fetched, cached_dataset):
    fetched("google/flan-t5-xxl")
    cached_dataset("cnn_dailymail")
    spec = write(tmp_path, row_spec("google/flan-t5-xxl", "p4d.24xlarge", "bf16", "none", batch_size=8))
    assert main(["plan", spec, "--json", "--measured", "23.9"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["fits"] is True and data["max_batch_size"] > 8 and data["host_bytes"] > 0
    assert data["per_device_bytes"] < data["device_memory_bytes"]
    assert 9.5 < data["hours"] < 10.5 and data["cost_usd"] == data["hours"] * 32.7726
    assert "DeepSpeed 0.19.8 ZeRO-3 estimator" in data["formula"]


def test_plan_says_what_does_not_fit_and_exits_1(tmp_path, capsys, fetched):
    fetched("google/flan-t5-xxl")
    spec = write(tmp_path, row_spec("google/flan-t5-xxl", "g5.24xlarge", "bf16", "none", batch_size=8))
    assert main(["plan", spec]) == 1
    out = capsys.readouterr().out
    assert "does NOT fit" in out and "setups that fit:" in out and "on this hardware: " in out


def test_run_refuses_a_spec_that_will_not_fit_unless_forced(tmp_path, home, capsys, fetched):
    fetched("bert-large-uncased")
    spec = write(
        tmp_path,
        {
            "task": "text-classification",
            "model": "bert-large-uncased",
            "dataset": {"max_length": 512},
            "train": {"batch_size": 256},
            "hardware": {"accelerator": "cuda", "instance_type": "g4dn.xlarge"},
        },
    )
    assert main(["run", spec]) == 2
    error = capsys.readouterr().err
    assert error.startswith("nbtoolkit: predicted ") and "exceeds the 15.0 GiB of one T4" in error
    assert error.count("\n") == 1 and "--force" in error
    assert JobStore(home).list() == []
    assert main(["run", spec, "--force"]) == 0
    [record] = JobStore(home).list()
    out, error = capsys.readouterr()
    assert record.id in out and error.startswith("nbtoolkit: warning: predicted ")
    stop(record.id, store=JobStore(home))


def test_plan_of_a_model_that_cannot_be_sized_is_one_sentence(tmp_path, capsys):
    spec = write(
        tmp_path,
        {
            "task": "summarization",
            "model": "someone/unknown-t5",
            "hardware": {"accelerator": "cuda", "instance_type": "p3.2xlarge"},
        },
    )
    assert main(["plan", spec]) == 2
    error = capsys.readouterr().err
    assert error.startswith("nbtoolkit: model 'someone/unknown-t5' is not on this machine") and error.count("\n") == 1
    assert "(hf download someone/unknown-t5)" in error


def test_plan_with_max_steps_but_no_pace_names_the_pace_not_the_steps(tmp_path, capsys):
    """A chat spec on this CPU with train.max_steps: the steps are known, the hardware's pace is what is missing."""
    spec = write(tmp_path, {"task": "chat", "train": {"max_steps": 10}})
    main(["plan", spec, "--no-past-jobs"])
    time_line = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("time:"))
    assert "10 steps" in time_line and "hardware.instance_type" in time_line and "train.max_steps" not in time_line


def test_a_setup_whose_price_is_unknown_is_offered_priced_ones_not_cheaper_ones(tmp_path, capsys):
    """ml.trn1.2xlarge has no SageMaker price in the catalog: the setups listed beside it have one, and are not
    called cheaper than a price nobody knows."""
    trn1 = {"target": "sagemaker", "instance_type": "ml.trn1.2xlarge", "accelerator": "neuron"}
    spec = write(
        tmp_path, {"task": "text-classification", "hardware": trn1, "sagemaker": {"role": "arn:aws:iam::1:role/r"}}
    )
    main(["plan", spec])
    out = capsys.readouterr().out
    assert "cost: unknown" in out and "cheaper setups" not in out
    assert "setups that fit, with a known price (this one's is not known):" in out
