"""Every example notebook's real run renders exactly its reviewed golden launch (tests/real_launches.py),
with as many processes as the planner sizes."""

from __future__ import annotations

import json

import pytest

from nbtoolkit.planner import plan
from tests.real_launches import (
    COMPILED,
    GOLDEN,
    ROOT,
    as_launched,
    golden_files,
    launched_processes,
    real_specs,
)

SPECS = real_specs()


@pytest.mark.parametrize("name", sorted(SPECS))
def test_the_real_launch_is_the_reviewed_golden(name):
    rendered = golden_files(as_launched(name, SPECS[name]))
    kept = {
        path.relative_to(GOLDEN / name).as_posix(): path.read_text()
        for path in (GOLDEN / name).rglob("*")
        if path.is_file()
    }
    assert sorted(rendered) == sorted(kept), "regenerate: python -m tests.real_launches, then review the diff"
    for file_name, text in rendered.items():
        assert text == kept[file_name], f"{name}/{file_name} changed: python -m tests.real_launches, review the diff"


@pytest.mark.parametrize("name", sorted(SPECS))
def test_the_golden_world_size_is_the_planners(name):
    spec = SPECS[name]
    result = plan(spec, alternatives=False)
    assert launched_processes(spec) == result.devices_per_node * result.nodes == spec.world_size


def test_the_flan_t5_launch_is_the_tutorials():
    """Seed 003: `deepspeed --num_gpus=8 ... --deepspeed configs/ds_flan_t5_z3_config_bf16.json`, bf16,
    AdamW + WarmupLR with `auto` values, ZeRO-3 without offload; gradient checkpointing by its script's default."""
    golden = GOLDEN / "flan-t5-xxl"
    assert "-m deepspeed.launcher.runner --num_gpus=8 " in (golden / "run.sh").read_text()
    config = json.loads((golden / "ds_config.json").read_text())
    assert config["bf16"] == {"enabled": "auto"} and config["optimizer"]["type"] == "AdamW"
    assert config["scheduler"] == {
        "type": "WarmupLR",
        "params": {"warmup_min_lr": "auto", "warmup_max_lr": "auto", "warmup_num_steps": "auto"},
    }
    assert config["zero_optimization"]["stage"] == 3 and "offload_optimizer" not in config["zero_optimization"]
    spec = SPECS["flan-t5-xxl"]
    assert spec.train.gradient_checkpointing and (spec.dataset.max_length, spec.dataset.max_target_length) == (500, 129)
    assert plan(spec, alternatives=False).fits


def test_the_bert_emotion_launch_is_the_tutorials():
    """Seed 002: `torchrun --nproc_per_node=2 run_glue.py ... --bf16 True --per_device_train_batch_size 16
    --learning_rate 5e-5 --num_train_epochs 3` on a trn1.2xlarge, no separate precompile; run_glue's defaults for
    the rest: eval batch 8, a log line every 500 steps, one evaluation after training."""
    golden = GOLDEN / "bert-emotion-trainium"
    run_sh = (golden / "run.sh").read_text()
    assert "torchrun --nnodes=1 --nproc_per_node=2 " in run_sh and "export NEURON_RT_STOCHASTIC_ROUNDING_EN=1" in run_sh
    assert "XLA_USE_BF16" not in run_sh  # ended with Neuron 2.24
    assert "neuron_parallel_compile" not in run_sh and run_sh.count("# stage: ") == 1
    spec = json.loads((golden / "spec.json").read_text())
    assert (spec["train"]["batch_size"], spec["train"]["learning_rate"], spec["train"]["epochs"]) == (16, 5e-5, 3)
    assert (spec["train"]["eval_batch_size"], spec["train"]["logging_steps"], spec["extra"]) == (
        8,
        500,
        {"eval_strategy": "no"},
    )
    assert spec["dataset"]["name"] == "philschmid/emotion" and spec["precision"] == "bf16"


def test_the_gpt2_launch_is_the_tutorials():
    """Seed 004: GPT-2 on wikitext-103 (block 512) on ml.p4d.24xlarge instances, data parallel over all their
    GPUs, batch 13 per GPU natively and 25 compiled, the learning rate 5e-5 scaled from a batch of 32."""
    from nbtoolkit.compiled import compiled_variants

    job = json.loads((GOLDEN / "gpt2-wikitext-sagemaker" / "sagemaker" / "job.json").read_text())
    assert (job["instance_type"], job["instance_count"], job["processes_per_node"]) == ("ml.p4d.24xlarge", 2, 8)
    spec = SPECS["gpt2-wikitext-sagemaker"]
    assert (spec.dataset.max_length, spec.train.batch_size) == (512, 13)
    assert spec.train.learning_rate == pytest.approx(5e-5 / 32 * 13)
    changes = json.loads((ROOT / "notebooks" / "specs" / f"gpt2-wikitext-sagemaker{COMPILED}").read_text())
    assert changes == {"train": {"batch_size": 25, "learning_rate": 5e-5 / 32 * 25}}
    native, compiled = compiled_variants(spec, changes).values()
    assert (native.compile, compiled.compile, compiled.train.batch_size) == ("none", "torch", 25)
    assert compiled.hardware == native.hardware and compiled.world_size == 16


def test_the_bert_qa_launch_is_the_tutorials():
    """Seed 001: 2 x ml.p3.16xlarge, every GPU a data-parallel rank, fp16, batch 4 per GPU, 2 epochs cut at
    max_steps 100, 384/128; in an image whose PyTorch build has V100 (sm_70) kernels."""
    from nbtoolkit.hardware.gpu_builds import pytorch_runs_on

    job = json.loads((GOLDEN / "bert-qa-sagemaker" / "sagemaker" / "job.json").read_text())
    assert (job["instance_type"], job["instance_count"], job["processes_per_node"]) == ("ml.p3.16xlarge", 2, 8)
    assert job["strategy"] == "ddp" and job["distributed"]
    assert job["image_lookup"]["base_framework_version"] == "pytorch2.8.0" and pytorch_runs_on("2.8.0", "12.9", "V100")
    spec = json.loads((GOLDEN / "bert-qa-sagemaker" / "sagemaker" / "code" / "spec.json").read_text())
    assert (spec["train"]["batch_size"], spec["train"]["epochs"], spec["precision"]) == (4, 2, "fp16")
    assert spec["train"]["max_steps"] == 100
    assert (spec["dataset"]["max_length"], spec["dataset"]["doc_stride"]) == (384, 128)


@pytest.mark.parametrize(
    ("name", "workers", "model", "batch", "accum", "cores"),
    [("t5-small-trainium", 2, "t5-small", 32, 32, 4), ("t5-large-trainium", 32, "t5-large", 4, 11, 64)],
)
def test_the_t5_trainium_launches_are_the_tutorials(name, workers, model, batch, accum, cores):
    """Seed 000 and its scripts (run_2w.sh, run_32w.sh): precompile on the same command cut to --max_steps 100
    --max_eval_samples 100, then torchrun with one worker per NeuronCore at the scripts' batch and gradient
    accumulation, eval on validation once, in full bf16 by the pinned SDK's mechanism (XLA_USE_BF16 ended with 2.24);
    then predict_with_generate on CPU (NEURON_NUM_DEVICES=0) over the test split on every core, not one."""
    run_sh = (GOLDEN / name / "run.sh").read_text()
    stages = [line.removeprefix("# stage: ") for line in run_sh.splitlines() if line.startswith("# stage: ")]
    assert stages == ["precompile", "train", "predict"] and "export NEURON_RT_STOCHASTIC_ROUNDING_EN=1" in run_sh
    assert "XLA_USE_BF16" not in run_sh
    assert f"neuron_parallel_compile torchrun --nnodes=1 --nproc_per_node={workers} " in run_sh
    assert f"NEURON_NUM_DEVICES=0 OMP_NUM_THREADS={cores} python3 -m nbtoolkit.train.predict --spec spec.json" in run_sh
    spec = json.loads((GOLDEN / name / "spec.json").read_text())
    assert spec["model"] == model and spec["dataset"]["eval_split"] == "validation"
    assert spec["extra"]["eval_strategy"] == "no" and spec["neuron"]["predict_split"] == "test"
    assert (spec["train"]["batch_size"], spec["train"]["grad_accum"], spec["train"]["eval_batch_size"]) == (
        batch,
        accum,
        4,
    )
    trial = json.loads((GOLDEN / name / "precompile" / "spec.json").read_text())
    assert trial["train"]["max_steps"] == 100 and trial["dataset"]["max_eval_samples"] == 100
    assert spec["extra"]["dataloader_drop_last"]  # a last partial batch would be a graph no trial traced
    for section in ("train", "dataset", "extra", "precision"):  # otherwise the very run it traces
        differs = (
            {
                key
                for key in set(trial[section]) | set(spec[section])
                if (trial[section] or {}).get(key) != (spec[section] or {}).get(key)
            }
            if isinstance(spec[section], dict)
            else ({section} if trial[section] != spec[section] else set())
        )
        assert differs <= {"max_steps", "save_steps", "predict_with_generate", "max_eval_samples"}, differs
