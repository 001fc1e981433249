"""Rendering the distributed launches (torchrun, DeepSpeed, Neuron) and their run.sh; no processes.

The Neuron and DeepSpeed expectations are the tutorials' own text (../shared/seeds/000, 002, 003).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from nbtoolkit import backends
from nbtoolkit.backends import LaunchError, dispatch
from nbtoolkit.launching.launch import Launch
from nbtoolkit.spec import SpecError, load_spec
from tests.conftest import PYTHON, TESTS

FAKE_BIN = TESTS / "fakes" / "bin"
TASK = {"task": "text-classification"}


def render(data: dict) -> Launch:
    return dispatch.render(load_spec({**TASK, **data}))


def option(argv: list[str], name: str) -> str:
    return next(item.split("=", 1)[1] for item in argv if item.startswith(f"{name}="))


# -- torchrun ----------------------------------------------------------------------------------


def test_torchrun_one_node_picks_a_free_port_and_prefixes_ranks():
    launch = render({"hardware": {"devices": 2}})
    assert backends.backend_name(load_spec({**TASK, "hardware": {"devices": 2}})) == "torchrun"
    argv = launch.main_stage.argv
    assert argv[1:3] == ["-m", "torch.distributed.run"]
    assert option(argv, "--nproc_per_node") == "2" and option(argv, "--nnodes") == "1"
    assert option(argv, "--rdzv_backend") == "c10d"
    host, port = option(argv, "--rdzv_endpoint").split(":")
    assert host == "127.0.0.1" and 1024 < int(port) < 65536
    assert option(argv, "--tee") == "3" and argv[-4:] == ["-m", "nbtoolkit.train", "--spec", "spec.json"]
    assert launch.env["TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE"] == "[rank${rank}]:"
    assert launch.env["OMP_NUM_THREADS"] == "1"
    assert not launch.per_node and "NODE_RANK" not in launch.run_sh()


def test_torchrun_multi_node_run_sh_takes_the_node_rank(tmp_path):
    spec = {"hardware": {"devices": 2, "nodes": 3, "node_rank": 1, "master_addr": "10.0.0.5"}}
    launch = render(spec)
    argv = launch.main_stage.argv
    assert option(argv, "--node_rank") == "1" and option(argv, "--rdzv_conf") == "is_host=0"
    assert option(argv, "--rdzv_endpoint") == "10.0.0.5:29500"  # several nodes agree on the default port
    # every node computes the same rendezvous id; only the node rank differs
    other = render({"hardware": {**spec["hardware"], "node_rank": 2}})
    assert option(other.main_stage.argv, "--rdzv_id") == option(argv, "--rdzv_id")

    script = tmp_path / "run.sh"
    script.write_text(launch.run_sh().replace(PYTHON, "echo"))
    script.chmod(0o755)
    missing = subprocess.run([script], capture_output=True, text=True)
    assert missing.returncode != 0 and "usage: run.sh NODE_RANK (0 to 2; 0 on the master node)" in missing.stderr
    for rank, is_host in (("0", "1"), ("2", "0")):
        shown = subprocess.run([script, rank], capture_output=True, text=True, check=True).stdout.split()
        assert f"--node_rank={rank}" in shown and f"--rdzv_conf=is_host={is_host}" in shown


# -- DeepSpeed ---------------------------------------------------------------------------------

#: ds_flan_t5_z3_config_bf16.json as printed in the FLAN-T5 XL/XXL tutorial (seed 003)
TUTORIAL_Z3_BF16 = {
    "bf16": {"enabled": "auto"},
    "optimizer": {"type": "AdamW", "params": {"lr": "auto", "betas": "auto", "eps": "auto", "weight_decay": "auto"}},
    "scheduler": {
        "type": "WarmupLR",
        "params": {"warmup_min_lr": "auto", "warmup_max_lr": "auto", "warmup_num_steps": "auto"},
    },
    "zero_optimization": {
        "stage": 3,
        "overlap_comm": True,
        "contiguous_gradients": True,
        "sub_group_size": 1e9,
        "reduce_bucket_size": "auto",
        "stage3_prefetch_bucket_size": "auto",
        "stage3_param_persistence_threshold": "auto",
        "stage3_max_live_parameters": 1e9,
        "stage3_max_reuse_distance": 1e9,
        "stage3_gather_16bit_weights_on_model_save": False,
    },
    "gradient_accumulation_steps": "auto",
    "gradient_clipping": "auto",
    "steps_per_print": 2000,
    "train_batch_size": "auto",
    "train_micro_batch_size_per_gpu": "auto",
    "wall_clock_breakdown": False,
}


def ds_config(launch: Launch) -> dict:
    return json.loads(launch.files["ds_config.json"])


def test_tutorial_configs_by_name():
    launch = render({"parallelism": {"deepspeed_config": "ds_flan_t5_z3_config_bf16"}, "precision": "bf16"})
    assert ds_config(launch) == TUTORIAL_Z3_BF16
    offload = ds_config(
        render({"parallelism": {"deepspeed_config": "ds_flan_t5_z3_offload"}, "hardware": {"accelerator": "cuda"}})
    )
    assert offload["fp16"]["enabled"] == "auto" and "bf16" not in offload
    assert offload["zero_optimization"]["offload_optimizer"] == {"device": "cpu", "pin_memory": True}
    assert offload["zero_optimization"]["offload_param"] == {"device": "cpu", "pin_memory": True}
    spec = load_spec({**TASK, "parallelism": {"deepspeed_config": "ds_flan_t5_z3_offload_bf16"}, "precision": "bf16"})
    assert (spec.parallelism.strategy, spec.parallelism.zero_stage, spec.parallelism.offload_params) == (
        "deepspeed",
        3,
        "cpu",
    )


@pytest.mark.parametrize(
    ("parallelism", "message"),
    [
        (
            {"deepspeed_config": "ds_flan_t5_z3_config", "zero_stage": 2},
            "parallelism.zero_stage 2 disagrees with deepspeed_config 'ds_flan_t5_z3_config', which sets zero_stage 3",
        ),
        (
            {"deepspeed_config": "ds_flan_t5_z3_config_bf16"},
            "parallelism.deepspeed_config 'ds_flan_t5_z3_config_bf16' trains in bf16, but precision is 'fp32'",
        ),
        (
            {"strategy": "deepspeed", "zero_stage": 2, "offload_params": "cpu"},
            "parallelism.offload_params 'cpu' needs ZeRO stage 3",
        ),
    ],
)
def test_deepspeed_settings_that_disagree_are_refused(parallelism, message):
    with pytest.raises(SpecError, match=message):
        load_spec({**TASK, "parallelism": parallelism})


def test_generated_config_leaves_trainer_values_auto():
    config = ds_config(render({"parallelism": {"strategy": "deepspeed", "zero_stage": 2}}))
    for key in (
        "gradient_accumulation_steps",
        "gradient_clipping",
        "train_batch_size",
        "train_micro_batch_size_per_gpu",
    ):
        assert config[key] == "auto"
    assert config["bf16"]["enabled"] == config["fp16"]["enabled"] == "auto"
    # the Trainer's own optimizer and schedule, as in a DDP run
    assert "optimizer" not in config and "scheduler" not in config
    assert config["zero_optimization"]["stage"] == 2

    offload = ds_config(
        render(
            {
                "parallelism": {
                    "strategy": "deepspeed",
                    "zero_stage": 3,
                    "offload_optimizer": "nvme",
                    "offload_params": "cpu",
                    "nvme_path": "/local_nvme",
                }
            }
        )
    )
    zero = offload["zero_optimization"]
    assert zero["offload_optimizer"] == {"device": "nvme", "pin_memory": True, "nvme_path": "/local_nvme"}
    assert zero["offload_param"]["device"] == "cpu" and zero["stage3_gather_16bit_weights_on_model_save"] is True
    assert offload["optimizer"]["type"] == "AdamW" and offload["optimizer"]["params"]["lr"] == "auto"


def test_deepspeed_through_torchrun_by_default_or_its_own_launcher():
    parallelism = {"strategy": "deepspeed", "zero_stage": 2}
    through_torchrun = render({"hardware": {"devices": 2}, "parallelism": parallelism})
    assert through_torchrun.backend == "deepspeed" and through_torchrun.env["DS_ACCELERATOR"] == "cpu"
    assert through_torchrun.main_stage.argv[1:3] == ["-m", "torch.distributed.run"]
    explicit = render({"launcher": "torchrun", "hardware": {"devices": 2}, "parallelism": parallelism})
    assert explicit.backend == "deepspeed" and "ds_config.json" in explicit.files

    own = render(
        {"launcher": "deepspeed", "hardware": {"devices": 2, "master_port": 29600}, "parallelism": parallelism}
    )
    assert own.main_stage.argv[1:] == [
        "-m",
        "deepspeed.launcher.runner",
        "--num_gpus=2",
        "--master_port=29600",
        "--module",
        "nbtoolkit.train",
        "--spec",
        "spec.json",
    ]
    nodes = render(
        {"launcher": "deepspeed", "hardware": {"devices": 2, "nodes": 2, "node_rank": 1}, "parallelism": parallelism}
    )
    argv = nodes.main_stage.argv
    assert "--no_ssh" in argv and "--node_rank=1" in argv and "--hostfile=hostfile" in argv
    assert nodes.files["hostfile"].splitlines()[-2:] == ["node0 slots=2", "node1 slots=2"]
    assert '--node_rank="$NODE_RANK"' in nodes.run_sh()


def test_deepspeed_preflight_names_the_install(monkeypatch):
    import importlib.util

    from nbtoolkit.backends.deepspeed.render import preflight

    spec = load_spec({**TASK, "parallelism": {"strategy": "deepspeed"}})
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(
        LaunchError, match=r"needs DeepSpeed, which is not installed here; install it with `make deepspeed`"
    ):
        preflight(spec)


def test_ops_a_config_needs():
    from nbtoolkit.train.deepspeed_ops import builders_needed

    assert builders_needed({"zero_optimization": {"stage": 2}}, cpu=True) == ["ShareMemCommBuilder"]
    offload = {"optimizer": {}, "zero_optimization": {"offload_optimizer": {"device": "cpu"}}}
    assert builders_needed(offload, cpu=True) == ["ShareMemCommBuilder", "CPUAdamBuilder"]
    assert builders_needed({"optimizer": {}, "zero_optimization": {"stage": 3}}, cpu=False) == ["FusedAdamBuilder"]
    nvme = {
        "optimizer": {},
        "zero_optimization": {"offload_param": {"device": "nvme"}, "offload_optimizer": {"device": "cpu"}},
    }
    assert builders_needed(nvme, cpu=False) == ["CPUAdamBuilder", "AsyncIOBuilder"]


def test_op_builds_are_announced_unless_prebuilt_or_cached(tmp_path, monkeypatch, capsys):
    import deepspeed.git_version_info as version_info

    from nbtoolkit.train.deepspeed_ops import announce_op_builds, ops_to_build

    monkeypatch.setenv("DS_ACCELERATOR", "cpu")
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "extensions"))
    config = {"optimizer": {"type": "AdamW"}, "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu"}}}
    monkeypatch.setattr(version_info, "installed_ops", {})
    (tmp_path / "ds_config.json").write_text(json.dumps(config))
    announce_op_builds(tmp_path / "ds_config.json")
    assert "DeepSpeed op(s) deepspeed_shm_comm, cpu_adam not prebuilt: compiling now" in capsys.readouterr().out
    cached = tmp_path / "extensions" / "py311_cpu" / "cpu_adam"
    cached.mkdir(parents=True)
    (cached / "cpu_adam.so").touch()
    assert ops_to_build(config) == ["deepspeed_shm_comm"]
    monkeypatch.setattr(version_info, "installed_ops", {"deepspeed_shm_comm": 1})
    assert ops_to_build(config) == []


# -- Neuron ------------------------------------------------------------------------------------

NEURON = {"hardware": {"accelerator": "neuron", "instance_type": "trn1.2xlarge"}, "precision": "bf16"}


def test_neuron_commands_and_env_follow_the_tutorials():
    launch = render({**NEURON, "neuron": {"predict": True}})
    assert [stage.name for stage in launch.stages] == ["precompile", "train", "predict"]
    precompile, train, predict = launch.stages
    # seed 002: `torchrun --nproc_per_node=2 ...` on a trn1.2xlarge's 2 NeuronCores
    assert train.argv[:3] == ["torchrun", "--nnodes=1", "--nproc_per_node=2"]
    # seed 000's XLA_USE_BF16=1 ended with Neuron 2.24: the model cast to bf16 with stochastic rounding replaces it;
    # `neuron_parallel_compile <the same command>` with fewer steps
    assert launch.env["NEURON_RT_STOCHASTIC_ROUNDING_EN"] == "1" and "XLA_USE_BF16" not in launch.env
    assert precompile.argv[0] == "neuron_parallel_compile" and precompile.argv[1:-5] == train.argv[:-1]
    assert precompile.argv[-5:] == [
        "precompile/spec.json",
        "--metrics",
        "precompile/metrics.jsonl",
        "--output-dir",
        "precompile/output",
    ]
    short = json.loads(launch.files["precompile/spec.json"])
    assert short["train"]["max_steps"] == 10 and short["train"]["predict_with_generate"] is False
    # seed 000: predict with generate on CPU, NEURON_NUM_DEVICES=0, on the trn1.2xlarge's 4 cores (not one thread)
    assert predict.env == {"NEURON_NUM_DEVICES": "0", "OMP_NUM_THREADS": "4"}
    assert predict.argv == ["python3", "-m", "nbtoolkit.train.predict", "--spec", "spec.json"]
    assert launch.env["NEURON_CC_FLAGS"] == "--cache_dir=/var/tmp/neuron-compile-cache"
    run_sh = launch.run_sh()
    assert "\nneuron_parallel_compile torchrun --nnodes=1 --nproc_per_node=2 " in run_sh
    assert "\nNEURON_NUM_DEVICES=0 OMP_NUM_THREADS=4 python3 -m nbtoolkit.train.predict --spec spec.json\n" in run_sh


def test_neuron_workers_per_instance_type():
    assert load_spec({**TASK, **NEURON}).hardware.devices == 2
    big = {"accelerator": "neuron", "instance_type": "trn1.32xlarge"}
    assert load_spec({**TASK, "hardware": big}).hardware.devices == 32
    assert load_spec({**TASK, "hardware": {**big, "devices": 8}}).world_size == 8
    with pytest.raises(SpecError, match="hardware.devices 4 does not fit trn1.32xlarge: .* use 1, 2, 8, 32"):
        load_spec({**TASK, "hardware": {**big, "devices": 4}})
    plain = render(
        {**NEURON, "precision": "fp32", "neuron": {"precompile": False, "cc_flags": "--model-type=transformer"}}
    )
    assert [stage.name for stage in plain.stages] == ["train"] and "NEURON_RT_STOCHASTIC_ROUNDING_EN" not in plain.env
    assert plain.env["NEURON_CC_FLAGS"] == "--cache_dir=/var/tmp/neuron-compile-cache --model-type=transformer"


def test_neuron_block_needs_a_neuron_run():
    with pytest.raises(SpecError, match="the neuron block applies to Trainium runs"):
        load_spec({**TASK, "neuron": {"predict": True}})


def test_off_trainium_a_neuron_launch_is_refused_but_exports(home, tmp_path, monkeypatch):
    from nbtoolkit.api import launch
    from nbtoolkit.cli import main

    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    spec = {**TASK, **NEURON}
    with pytest.raises(
        LaunchError,
        match="needs a Trainium instance, but neuron-ls is not on PATH here; .* `nbtoolkit launch-files SPEC`",
    ):
        launch(spec)
    spec_file = tmp_path / "t5.json"
    spec_file.write_text(json.dumps(spec))
    assert main(["launch-files", str(spec_file), "--out", str(tmp_path / "trn1")]) == 0
    assert "neuron_parallel_compile torchrun" in (tmp_path / "trn1" / "run.sh").read_text()


def test_neuron_preflight_counts_neuroncores(monkeypatch):
    from nbtoolkit.backends.neuron.render import neuron_cores, preflight

    monkeypatch.setenv("PATH", os.pathsep.join([str(FAKE_BIN), str(Path(PYTHON).parent), os.environ["PATH"]]))
    listing = subprocess.run([FAKE_BIN / "neuron-ls"], capture_output=True, text=True, check=True).stdout
    assert neuron_cores(listing) == 2
    preflight(load_spec({**TASK, **NEURON, "neuron": {"precompile": False}}))
    with pytest.raises(LaunchError, match="hardware.devices 8 is more workers than the 2 NeuronCores neuron-ls shows"):
        preflight(
            load_spec({**TASK, "hardware": {"accelerator": "neuron", "devices": 8}, "neuron": {"precompile": False}})
        )
