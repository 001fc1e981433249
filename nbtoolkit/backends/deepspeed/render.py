"""The deepspeed backend's launch: render, and the checks it makes."""

from __future__ import annotations

import importlib.util
import json
import sys

from nbtoolkit.backends import LaunchError
from nbtoolkit.backends.program import program_args, writes_own_metrics
from nbtoolkit.backends.torchrun.render import multi_process_launch, rendezvous_port, torchrun_launch, train_stage
from nbtoolkit.launching.launch import Launch, Stage, job_path
from nbtoolkit.launching.runtime import DEEPSPEED_CONFIG_FILE
from nbtoolkit.spec import RunSpec
from nbtoolkit.spec_parts.blocks import DEEPSPEED_TUTORIAL_CONFIGS, Offload, ParallelismSpec

NAME = "deepspeed"
HOSTFILE = "hostfile"
#: DeepSpeed's launcher through this interpreter (the `deepspeed` command runs the same)
DEEPSPEED = [sys.executable, "-m", "deepspeed.launcher.runner"]

AUTO_OPTIMIZER = {"type": "AdamW", "params": {"lr": "auto", "betas": "auto", "eps": "auto", "weight_decay": "auto"}}
TUTORIAL_SCHEDULER = {
    "type": "WarmupLR",
    "params": {"warmup_min_lr": "auto", "warmup_max_lr": "auto", "warmup_num_steps": "auto"},
}
FP16 = {
    "enabled": "auto",
    "loss_scale": 0,
    "loss_scale_window": 1000,
    "initial_scale_power": 16,
    "hysteresis": 2,
    "min_loss_scale": 1,
}
BF16 = {"enabled": "auto"}
ZERO_1_2 = {
    "allgather_partitions": True,
    "allgather_bucket_size": 2e8,
    "overlap_comm": True,
    "reduce_scatter": True,
    "reduce_bucket_size": "auto",
    "contiguous_gradients": True,
}
ZERO_3 = {
    "overlap_comm": True,
    "contiguous_gradients": True,
    "sub_group_size": 1e9,
    "reduce_bucket_size": "auto",
    "stage3_prefetch_bucket_size": "auto",
    "stage3_param_persistence_threshold": "auto",
    "stage3_max_live_parameters": 1e9,
    "stage3_max_reuse_distance": 1e9,
    # a loadable model in output/model rather than ZeRO shards only
    "stage3_gather_16bit_weights_on_model_save": True,
}
TRAINER_FILLED = {
    "gradient_accumulation_steps": "auto",
    "gradient_clipping": "auto",
    "steps_per_print": 2000,
    "train_batch_size": "auto",
    "train_micro_batch_size_per_gpu": "auto",
    "wall_clock_breakdown": False,
}


def offload(device: Offload, nvme_path: str | None) -> dict:
    return {"device": device, "pin_memory": True, **({"nvme_path": nvme_path} if device == "nvme" else {})}


def zero_optimization(parallelism: ParallelismSpec) -> dict:
    stage = parallelism.zero_stage
    zero: dict = {"stage": stage, **(ZERO_3 if stage == 3 else ZERO_1_2 if stage else {})}
    if parallelism.offload_optimizer != "none":
        zero["offload_optimizer"] = offload(parallelism.offload_optimizer, parallelism.nvme_path)
    if parallelism.offload_params != "none":
        zero["offload_param"] = offload(parallelism.offload_params, parallelism.nvme_path)
    return zero


def ds_config(spec: RunSpec) -> dict:
    """The spec's DeepSpeed config: a tutorial config by name, else generated from its ZeRO settings."""
    parallelism = spec.parallelism
    if parallelism.deepspeed_config:
        return tutorial_config(parallelism.deepspeed_config)
    optimizer = {"optimizer": AUTO_OPTIMIZER} if parallelism.offload_optimizer != "none" else {}
    return {
        "bf16": BF16,
        "fp16": FP16,
        **optimizer,
        "zero_optimization": zero_optimization(parallelism),
        **TRAINER_FILLED,
    }


def tutorial_config(name: str) -> dict:
    """One of the FLAN-T5 tutorial's four ZeRO-3 configs, as it publishes them (DeepSpeed's
    optimizer and WarmupLR schedule; ZeRO shards, not a merged model, at save)."""
    device = DEEPSPEED_TUTORIAL_CONFIGS[name]
    offloads = (
        {} if device == "none" else {"offload_optimizer": offload(device, None), "offload_param": offload(device, None)}
    )
    zero = {"stage": 3, **offloads, **ZERO_3, "stage3_gather_16bit_weights_on_model_save": False}
    precision = {"bf16": BF16} if name.endswith("_bf16") else {"fp16": FP16}
    return {
        **precision,
        "optimizer": AUTO_OPTIMIZER,
        "scheduler": TUTORIAL_SCHEDULER,
        "zero_optimization": zero,
        **TRAINER_FILLED,
    }


def hostfile(spec: RunSpec) -> str:
    """DeepSpeed's hostfile: one line per node. The names only count nodes under --no_ssh."""
    lines = [f"node{rank} slots={spec.hardware.devices}" for rank in range(spec.hardware.nodes)]
    return (
        "# with --no_ssh each node runs its own launcher (run.sh NODE_RANK), so these names are placeholders;\n"
        "# to start every node from one over ssh (pdsh), write the real hostnames and drop --no_ssh/--node_rank\n"
        + "\n".join(lines)
        + "\n"
    )


def deepspeed_argv(spec: RunSpec, port: int) -> list[str]:
    """`deepspeed [options] PROGRAM...`, the FLAN-T5 tutorial's way (`python -m` becomes `--module`)."""
    hardware = spec.hardware
    program = program_args(spec)
    if program[0] == "-m":
        program = ["--module", *program[1:]]
    nodes = (
        [
            f"--hostfile={HOSTFILE}",
            "--no_ssh",
            f"--node_rank={hardware.node_rank}",
            f"--master_addr={hardware.master_addr}",
        ]
        if hardware.nodes > 1
        else []
    )
    return [*DEEPSPEED, *nodes, f"--num_gpus={hardware.devices}", f"--master_port={port}", *program]


def render(spec: RunSpec) -> Launch:
    files = {DEEPSPEED_CONFIG_FILE: json.dumps(ds_config(spec), indent=2) + "\n"}
    env = {"DS_ACCELERATOR": "cpu"} if spec.hardware.accelerator == "cpu" else {}
    config = job_path(DEEPSPEED_CONFIG_FILE, in_job_dir=False)
    notes = (
        [f"your script finds the DeepSpeed config in the job folder: pass --deepspeed {config}"]
        if spec.script is not None
        else []
    )
    port = rendezvous_port(spec)
    if spec.launcher != "deepspeed":
        return torchrun_launch(spec, [train_stage(spec, port)], backend=NAME, env=env, files=files, notes=notes)
    if spec.hardware.nodes > 1:
        files[HOSTFILE] = hostfile(spec)
    stage = Stage(name="train", argv=deepspeed_argv(spec, port), metrics_from_log=not writes_own_metrics(spec))
    per_node = {f"--node_rank={spec.hardware.node_rank}": '--node_rank="$NODE_RANK"'}
    notes.append("DeepSpeed's launcher does not prefix log lines by rank (torchrun, the default, does)")
    return multi_process_launch(spec, [stage], backend=NAME, per_node=per_node, env=env, files=files, notes=notes)


def preflight(spec: RunSpec) -> None:
    if importlib.util.find_spec("deepspeed") is None:
        raise LaunchError(
            "parallelism.strategy 'deepspeed' needs DeepSpeed, which is not installed here; "
            "install it with `make deepspeed` (which also prebuilds its CPU ops) or pip install 'nbtoolkit-finetune[deepspeed]'"
        )
