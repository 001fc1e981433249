"""Rehearse a real run on this machine, before it costs money.

`rehearsal(spec)` turns the spec of a real run into one this machine runs in a minute or two: the
same launcher and process count (devices x nodes, the nodes on loopback, gloo), ZeRO stage and
offload, task, columns, prompt and lengths, with a tiny model of the same architecture (the real
config with its sizes scaled down) on a sample of the data, for a few steps and a save at the
end. A run wider than this machine holds is rehearsed narrower, in the same shape, and says so.
`rehearse(spec)` builds the tiny model, runs the rehearsal as jobs and reports each stage.

A rehearsal reaches nothing outside this machine, by construction: it keeps the spec's core fields
(no backend's block: no bucket, no cluster) and, of `extra`, only the TrainingArguments that shape
training here (`REHEARSED_EXTRA`); everything else (push_to_hub and hub_*, report_to, paths, what a
newer transformers adds) is dropped and named in the report. Trackers write into the job's folder,
and its processes run with the Hugging Face libraries offline.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nbtoolkit import backends
from nbtoolkit.inputs.bundled import TINY_MODELS
from nbtoolkit.planner.shapes import BERT_LIKE, T5_LIKE, ModelShapeError, model_config_fields
from nbtoolkit.rehearsal.image_envs import ImageRun, image_run
from nbtoolkit.rehearsal.samples import sample_rows
from nbtoolkit.spec import RunSpec, RunSpecCore, SpecError, load_spec, safe_name
from nbtoolkit.tasks import TASKS, TRL_TASKS

#: ranks this machine runs at once (gloo on CPU): wider runs are rehearsed narrower, in the same shape
MAX_RANKS = 8
STEPS = 4
#: the per-device batch a rehearsal runs at most (its memory line is for that batch)
MAX_BATCH = 8
#: gradient accumulation a rehearsal runs at most: the accumulating code path is the same at 2 as at 32, and the
#: tutorial's 32 x batch 8 of 512-token rows took T5 6 minutes here for 4 steps
MAX_GRAD_ACCUM = 2
#: tokens a rehearsal's evaluation generates at most (FLAN-T5's 129 with 4 beams took minutes of a rehearsal here)
MAX_GENERATED_TOKENS = 16
MODEL_DIR = "model"
#: what scores a grpo rehearsal's completions when its spec names reward models only (a share of digits: dense on
#: any text, where the bundled arithmetic answer check would score every random completion 0)
STAND_IN_REWARD = "nbtoolkit.rewards:number_reply"
#: a rehearsal's processes run with the Hugging Face libraries offline: its model, tokenizer and data are local
#: files, and nothing may reach the Hub (datasets' json loader otherwise pings S3 to count a download)
OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
#: what a rehearsal keeps of `extra`: TrainingArguments that change how training runs on this machine and send
#: nothing anywhere. An allow-list: a key not named here (a push, a tracker, a destination, the real run's
#: schedule, which the rehearsal's own few steps replace) is dropped and said. Keys a spec field sets never
#: reach here (nbtoolkit.spec_parts.extra refuses them)
REHEARSED_EXTRA = frozenset(
    {
        # optimization
        "optim",
        "optim_args",
        "optim_target_modules",
        "adam_beta1",
        "adam_beta2",
        "adam_epsilon",
        "lr_scheduler_type",
        "lr_scheduler_kwargs",
        "label_smoothing_factor",
        "neftune_noise_alpha",
        "full_determinism",
        # memory and speed
        "gradient_checkpointing_kwargs",
        "activation_checkpointing_kwargs",
        "auto_find_batch_size",
        "torch_compile_backend",
        "torch_compile_mode",
        "torch_empty_cache_steps",
        "tf32",
        "bf16_full_eval",
        "fp16_full_eval",
        "use_liger_kernel",
        "liger_kernel_config",
        "use_cache",
        # data
        "train_sampling_strategy",
        "length_column_name",
        "remove_unused_columns",
        "label_names",
        "dataloader_drop_last",
        "dataloader_num_workers",
        "dataloader_pin_memory",
        "dataloader_persistent_workers",
        "dataloader_prefetch_factor",
        "dataloader_in_order",
        "include_num_input_tokens_seen",
        "average_tokens_across_devices",
        # distribution
        "ddp_backend",
        "ddp_find_unused_parameters",
        "ddp_bucket_cap_mb",
        "ddp_broadcast_buffers",
        "ddp_static_graph",
        "ddp_timeout",
        "fsdp",
        "fsdp_config",
        "accelerator_config",
        # evaluation
        "eval_accumulation_steps",
        "eval_do_concat_batches",
        "batch_eval_metrics",
        "include_for_metrics",
        "prediction_loss_only",
        "metric_for_best_model",
        "greater_is_better",
        "load_best_model_at_end",
        "generation_max_length",
        "generation_num_beams",
    }
)
#: a tiny model per family: the sizes that replace the real ones (everything else in the config stays)
TINY_SIZES: dict[str, dict[str, int]] = {
    "t5": dict(d_model=64, d_kv=16, d_ff=160, num_heads=4, num_layers=2, num_decoder_layers=2),
    "bert": dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128),
    "gpt2": dict(n_embd=64, n_layer=2, n_head=2, n_inner=256),
    "decoder": dict(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        head_dim=16,
    ),
}
#: which bundled tokenizer a family's tiny model reads with
FAMILY_MODEL = {
    "t5": "nbtoolkit/tiny-t5",
    "bert": "nbtoolkit/tiny-bert",
    "gpt2": "nbtoolkit/tiny-gpt2",
    "decoder": "nbtoolkit/tiny-gpt2",
}


class RehearsalError(SpecError):
    """A spec that cannot be rehearsed here; the message says why."""


@dataclass(frozen=True)
class Rehearsal:
    """What will run here instead of the real run, and how it differs from it."""

    specs: list[dict[str, Any]]  # one per node, node_rank 0 first; their model is MODEL_DIR under the workdir
    model_type: str
    model_config: dict[str, Any]  # the real config, sizes scaled down; empty: the bundled `tokenizer_of` stands in
    tokenizer_of: str  # the bundled tiny model whose tokenizer the tiny model uses
    samples: dict[str, list[dict[str, Any]]]  # split -> rows, with the spec's column names
    samples_folder: str  # the folder the rows come from: the paths they name (images) are relative to it
    real_ranks: int
    notes: list[str] = field(default_factory=list)

    @property
    def ranks(self) -> int:
        first = self.specs[0]["hardware"]
        return first["devices"] * first["nodes"]


@dataclass(frozen=True)
class StageResult:
    node: int
    stage: str
    status: str  # passed | failed | skipped | not run
    reason: str | None = None

    def line(self, nodes: int) -> str:
        where = f" (node {self.node})" if nodes > 1 else ""
        return f"stage {self.stage}{where}: {self.status}" + (f": {self.reason}" if self.reason else "")


@dataclass
class RehearsalReport:
    rehearsal: Rehearsal
    jobs: list[str]
    stages: list[StageResult]
    seconds: float
    memory: str | None = None
    environment: str | None = None  # --image-env: the image's libraries it ran under

    @property
    def passed(self) -> bool:
        return bool(self.stages) and all(stage.status == "passed" for stage in self.stages)

    def lines(self) -> list[str]:
        rehearsal = self.rehearsal
        nodes = len(rehearsal.specs)
        head = (
            f"rehearsal of {rehearsal.real_ranks} rank(s) as {rehearsal.ranks} on this machine "
            f"({nodes} node(s) on loopback), tiny {rehearsal.model_type} model, {STEPS} steps: "
            f"{'passed' if self.passed else 'FAILED'} in {self.seconds:.0f} s (jobs {', '.join(self.jobs)})"
        )
        lines = [head, *(stage.line(nodes) for stage in self.stages)]
        if self.environment:
            lines.append(self.environment)
        if self.memory:
            lines.append(self.memory)
        return lines + [f"note: {note}" for note in rehearsal.notes]

    def __str__(self) -> str:
        return "\n".join(self.lines())


# -- the rehearsal spec ----------------------------------------------------------------------------


def rehearsal(spec: RunSpec | dict | str, *, max_ranks: int = MAX_RANKS, steps: int = STEPS) -> Rehearsal:
    """The rehearsal of a spec: pure, nothing runs (see `rehearse`)."""
    spec = load_spec(spec)
    if spec.script is not None:
        raise RehearsalError(
            "a spec with script: cannot be rehearsed yet: nbtoolkit cannot point your script's own "
            "arguments at a tiny model and sample data; rehearse the same spec without script:"
        )
    notes: list[str] = []
    # the core fields only: no backend's block (a bucket, a cluster, a remote engine's or Trainium's settings)
    data = {key: value for key, value in spec.model_dump(mode="json").items() if key in RunSpecCore.model_fields}
    data["name"] = safe_name(f"rehearse-{spec.display_name}", 60)
    hardware, parallelism = _topology(spec, max_ranks, notes)
    data["hardware"], data["parallelism"] = hardware, parallelism
    data["launcher"] = spec.launcher if spec.launcher in ("auto", "torchrun", "deepspeed") else "auto"
    if spec.hardware.accelerator == "neuron" or spec.compile == "neuron":
        data["compile"] = "none"
    if spec.precision == "fp16":
        data["precision"] = "bf16"
        notes.append("fp16 has no CPU kernels: bf16 stands in for it")
    model_type, config, tokenizer_of = _tiny_model(spec, notes)
    batch = min(spec.train.batch_size, MAX_BATCH)
    eval_batch = min(spec.train.eval_batch_size or spec.train.batch_size, MAX_BATCH)
    grad_accum = min(spec.train.grad_accum, MAX_GRAD_ACCUM)
    if grad_accum < spec.train.grad_accum:
        notes.append(f"gradient accumulation {spec.train.grad_accum} is rehearsed as {grad_accum}: the same code path")
    # every rank gets a full batch of each split (with dataloader_drop_last a short sample gives none at all)
    ranks = hardware["nodes"] * hardware["devices"]
    samples, samples_folder = sample_rows(spec, notes, examples=ranks * max(batch * grad_accum, eval_batch))
    data["dataset"] = {
        **data.get("dataset", {}),
        "name": None,
        "config": None,
        "files": None,
        "max_train_samples": None,
        "max_eval_samples": None,
    }
    if spec.task in TRL_TASKS and spec.dataset.chat_template is None and config:
        # a tiny stand-in's bundled tokenizer has no chat template of its own: ChatML (with generation markers) stands
        # in (a bundled model standing in whole, a vision-language one, brings its processor's)
        data["dataset"]["chat_template"] = "chatml"
        notes.append("the model's own chat template is not read here: ChatML stands in for it")
    data["train"] = {
        **data["train"],
        "max_steps": steps,
        "logging_steps": 1,
        "save_steps": steps,
        "eval_steps": steps,
        "eval_on_start": False,
        "batch_size": batch,
        "eval_batch_size": eval_batch,
        "grad_accum": grad_accum,
    }
    data["resume"] = None
    data["extra"] = {key: value for key, value in spec.extra.items() if key in REHEARSED_EXTRA}
    if TASKS[spec.task].evaluation_generates:  # on CPU as the real run on its hardware: Neuron's does not generate
        data["train"]["predict_with_generate"] = spec.generates_in_evaluation
    generated = data["extra"].get("generation_max_length") or spec.dataset.max_target_length
    if spec.generates_in_evaluation and isinstance(generated, int) and generated > MAX_GENERATED_TOKENS:
        data["extra"]["generation_max_length"] = MAX_GENERATED_TOKENS
        notes.append(
            f"evaluation generates {MAX_GENERATED_TOKENS} tokens, not {generated}: a random tiny model never ends its "
            "summary, and the generating code path is the same"
        )
    if spec.reward is not None and spec.reward.models:
        data["reward"] = _rehearsed_rewards(spec.reward, notes)
    dropped = [f"extra.{key}" for key in spec.extra if key not in REHEARSED_EXTRA]
    if dropped:
        notes.append(
            f"not rehearsed: {', '.join(dropped)} (a rehearsal keeps only the extra settings that shape training "
            "here; it pushes, uploads and reports nowhere, and runs its own few steps)"
        )
    if spec.report_to:
        notes.append(
            f"{', '.join(spec.report_to)} write(s) into the rehearsal job's folder (wandb offline, MLflow's local "
            "store): nothing is sent"
        )
    nodes = hardware["nodes"]
    specs = [{**data, "hardware": {**hardware, "node_rank": rank}} for rank in range(nodes)]
    return Rehearsal(
        specs=specs,
        model_type=model_type,
        model_config=config,
        tokenizer_of=tokenizer_of,
        samples=samples,
        samples_folder=str(samples_folder),
        real_ranks=spec.world_size,
        notes=notes,
    )


def _rehearsed_rewards(reward, notes: list[str]) -> dict[str, Any]:
    """A grpo run's reward block without its reward models (a rehearsal loads no real model, and the Hub is off
    here): its functions score alone, or, with none, the bundled dense reward stands in; the models' weights go."""
    functions = reward.model_dump(mode="json")["functions"] or [STAND_IN_REWARD]
    weights = reward.weights[: len(reward.functions)] if reward.weights and reward.functions else None
    notes.append(
        f"reward.models ({', '.join(reward.models)}) are not loaded in a rehearsal: "
        + ("its reward functions score alone" if reward.functions else f"{STAND_IN_REWARD} scores in their place")
    )
    return {**reward.model_dump(mode="json"), "functions": functions, "models": [], "weights": weights}


def _topology(spec: RunSpec, max_ranks: int, notes: list[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The same nodes and devices per node on CPU, narrowed to `max_ranks` in the same shape."""
    nodes, devices = spec.hardware.nodes, spec.hardware.devices
    if nodes * devices > max_ranks:  # a multi-node run stays multi-node: its rendezvous is what most often breaks
        nodes = min(nodes, max(max_ranks // 2, 2 if max_ranks >= 2 else 1))
        devices = min(devices, max(max_ranks // nodes, 1))
        notes.append(
            f"the real run's {spec.world_size} ranks ({spec.hardware.nodes} node(s) x {spec.hardware.devices}) "
            f"are more than this machine holds: rehearsed as {nodes} node(s) x {devices}, the same "
            "launcher and partitioning over fewer ranks"
        )
    parallelism = spec.parallelism.model_dump(mode="json")
    strategy = spec.parallelism.strategy
    if strategy in ("smddp", "smp", "xla"):
        parallelism.update(strategy="ddp", tensor_parallel_degree=1, pipeline_parallel_degree=1)
        engine = {
            "smddp": "SageMaker data parallel",
            "smp": "SageMaker model parallel",
            "xla": "torch-xla on NeuronCores",
        }[strategy]
        notes.append(
            f"{engine} runs only on its own hardware and images: the rehearsal runs the same ranks "
            "data-parallel with torchrun (gloo)"
        )
    if spec.hardware.accelerator == "neuron":
        notes.append(
            "the Neuron compiler and runtime cannot run here: the precompile stage is left out and the "
            "workers train on CPU"
        )
    if spec.hardware.target != backends.LOCAL:
        notes.append(
            f"the {spec.hardware.target} run's nodes are rehearsed as nodes on loopback; what it submits "
            f"there is checked by its golden launch (`nbtoolkit launch-files`), not here"
        )
    if nodes * devices > 1 and parallelism["strategy"] == "none":
        parallelism["strategy"] = "ddp"
    from nbtoolkit.launching.launch import free_port

    hardware = {
        "target": "local",
        "accelerator": "cpu",
        "devices": devices,
        "nodes": nodes,
        "master_addr": "127.0.0.1",
        "master_port": free_port("127.0.0.1") if nodes > 1 else None,
    }
    return hardware, parallelism


def _family(model_type: str, config: dict[str, Any]) -> str:
    if model_type in T5_LIKE:
        return "t5"
    if model_type in BERT_LIKE:
        return "bert"
    if model_type == "gpt2":
        return "gpt2"
    if config.get("is_encoder_decoder"):
        raise RehearsalError(
            f"a tiny {model_type} cannot be built here: rehearsals know t5-like encoder-decoders, "
            "bert-like encoders, gpt2 and llama-style decoders"
        )
    return "decoder"


def _tiny_model(spec: RunSpec, notes: list[str]) -> tuple[str, dict[str, Any], str]:
    """(model type, config with sizes scaled down, bundled model whose tokenizer it uses)."""
    try:
        config, _ = model_config_fields(spec.model_name)
    except ModelShapeError:
        bundled = TASKS[spec.task].bundled_model
        notes.append(f"no config of {spec.model_name} is available offline: the bundled {bundled} stands in")
        config = {"model_type": TINY_MODELS[bundled].model_type}
    config = {key: value for key, value in config.items() if key not in ("canonical", "aliases")}
    model_type = str(config["model_type"])
    if "vision_config" in config:  # a vision-language model: the task's bundled one is its layout at tiny sizes
        bundled = TASKS[spec.task].bundled_model
        layout = TINY_MODELS[bundled].model_type
        same = "the same layout" if layout == model_type else f"a {layout}, standing in for the {model_type}"
        notes.append(f"the bundled {bundled} ({same}, with its processor) stands in for {spec.model_name}")
        return model_type, {}, bundled
    family = _family(model_type, config)
    tokenizer_of = FAMILY_MODEL[family]
    return model_type, {**config, **TINY_SIZES[family]}, tokenizer_of


# -- running it -------------------------------------------------------------------------------------


def prepare(rehearsal_: Rehearsal, workdir: Path, image: ImageRun | None = None) -> list[dict[str, Any]]:
    """Write the sample data and build the tiny model under `workdir` (in the image's environment, if given, so the
    libraries that read it wrote it); the node specs, ready to launch."""
    data_dir = workdir / "data"
    data_dir.mkdir(parents=True, exist_ok=True)
    for entry in Path(rehearsal_.samples_folder).iterdir():  # what the rows name beside them (a folder of images)
        if entry.is_dir() and not (data_dir / entry.name).exists():
            (data_dir / entry.name).symlink_to(entry)
    files = {}
    for split, rows in rehearsal_.samples.items():
        path = data_dir / f"{split}.jsonl"
        path.write_text("".join(json.dumps(row) + "\n" for row in rows))
        files[split] = str(path)
    model_dir = workdir / MODEL_DIR
    if rehearsal_.model_config:
        _build_tiny_model(rehearsal_, model_dir, image)
    model = str(model_dir) if rehearsal_.model_config else rehearsal_.tokenizer_of
    return [{**spec, "model": model, "dataset": {**spec["dataset"], "files": files}} for spec in rehearsal_.specs]


def _build_tiny_model(rehearsal_: Rehearsal, model_dir: Path, image: ImageRun | None) -> None:
    """The real config at tiny sizes, saved by a process of its own (in the image's environment, if given)."""
    built = subprocess.run(
        [
            (image and image.python) or sys.executable,
            "-m",
            "nbtoolkit.train.tiny_model",
            "--out",
            str(model_dir),
            "--tokenizer-of",
            rehearsal_.tokenizer_of,
            "--config",
            json.dumps(rehearsal_.model_config),
        ],
        capture_output=True,
        text=True,
        env={**os.environ, **OFFLINE_ENV, **(image.env if image else {})},
    )
    if built.returncode != 0:
        reason = (built.stderr.strip().splitlines() or ["no output"])[-1]
        raise RehearsalError(f"the tiny {rehearsal_.model_type} model could not be built: {reason}")


def rehearse(
    spec: RunSpec | dict | str,
    *,
    workdir: str | Path | None = None,
    store=None,
    timeout: float = 900.0,
    max_ranks: int = MAX_RANKS,
    image_env: bool = False,
) -> RehearsalReport:
    """Run the rehearsal of a spec here: one job per node, waited for; a report of each stage. `image_env`: in the
    packages of the image the real run meets (nbtoolkit.rehearsal.image_envs), built first if need be."""
    from nbtoolkit.api import launch
    from nbtoolkit.lineage.chains import resolve
    from nbtoolkit.runner import JobStore

    started = time.monotonic()
    # `model: job:ID`: a tiny model of the earlier job's architecture stands in for it, as for any model
    spec = resolve(load_spec(spec), store or JobStore(), fetching=False).sizing
    plan_ = rehearsal(spec, max_ranks=max_ranks)
    workdir = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="nbtoolkit-rehearsal-"))
    image = image_run(spec, workdir) if image_env else None
    node_specs = prepare(plan_, workdir, image)
    env, python = {**OFFLINE_ENV, **(image.env if image else {})}, image.python if image else None
    jobs = [launch(node_spec, store=store, force=True, env=env, python=python) for node_spec in node_specs]
    for job in jobs:
        job.wait(timeout=max(timeout - (time.monotonic() - started), 1))
    stages = [result for node, job in enumerate(jobs) for result in _stage_results(node, job)]
    return RehearsalReport(
        rehearsal=plan_,
        jobs=[job.id for job in jobs],
        stages=stages,
        seconds=time.monotonic() - started,
        memory=_memory_line(node_specs[0], jobs),
        environment=image.line if image else None,
    )


def _stage_results(node: int, job) -> list[StageResult]:
    record = job.record
    if record.active:
        return [
            StageResult(node, stage["name"], "not run", f"still {record.status} at the time limit")
            for stage in record.stages
        ]
    results = []
    for stage in record.stages:
        status = stage.get("status")
        if status == "succeeded":
            results.append(StageResult(node, stage["name"], "passed"))
        elif status == "failed":
            results.append(StageResult(node, stage["name"], "failed", record.message or "it failed"))
        else:
            results.append(StageResult(node, stage["name"], "skipped" if status == "skipped" else "not run"))
    return results


def _memory_line(spec: dict[str, Any], jobs: list) -> str | None:
    """The planner's memory for the tiny model next to what rank 0 used (the rehearsal checks the planner too).

    Rank 0 is on whichever node the rendezvous made first, so its summary is looked for in every node's job.
    """
    from nbtoolkit.planner import plan

    summary = next(
        (
            record
            for job in jobs
            for record in reversed(job.records())
            if record.get("kind") == "summary" and record.get("peak_memory_mb") is not None
        ),
        None,
    )
    if summary is None:
        return None
    memory = plan(spec, alternatives=False).memory
    predicted = (memory.weights + memory.gradients + memory.optimizer + memory.gathered + memory.activations) / 2**20
    return (
        f"memory per rank: the planner predicts {predicted:.1f} MB of model states and activations for the tiny "
        f"model; rank 0 peaked at {summary['peak_memory_mb']:.0f} MB resident (that includes the Python, torch "
        "and transformers runtime, several hundred MB on its own)"
    )
