"""The training program: spec -> task setup -> HF Trainer -> metrics.jsonl and output/.

Runs in the job directory (the supervisor's working directory), so `spec.json`,
`metrics.jsonl` and `output/` are relative paths, and `run.sh` works the same by hand.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import sys
from pathlib import Path
from typing import Any

from nbtoolkit.launching.credentials import trainer_credentials
from nbtoolkit.launching.runtime import ERROR_PREFIX
from nbtoolkit.spec import RunSpec, SpecError, load_spec
from nbtoolkit.spec_parts.trackers import environment, run_name
from nbtoolkit.trained_model.saved_folders import config_folder


def training_arguments(spec: RunSpec, output_dir: str, has_eval: bool, arguments_class=None, **overrides):
    """TrainingArguments (or the task's or engine's subclass of it) from the spec; `spec.extra` has the last word."""
    from transformers import TrainingArguments

    train = spec.train
    eval_strategy = "no" if not has_eval else "steps" if train.eval_steps else "epoch"
    kwargs = dict(
        output_dir=output_dir,
        num_train_epochs=train.epochs,
        max_steps=train.max_steps or -1,
        per_device_train_batch_size=train.batch_size,
        per_device_eval_batch_size=train.eval_batch_size or train.batch_size,
        gradient_accumulation_steps=train.grad_accum,
        learning_rate=train.learning_rate,
        warmup_steps=train.warmup,
        weight_decay=train.weight_decay,
        max_grad_norm=train.max_grad_norm,
        seed=train.seed,
        data_seed=train.seed,
        logging_steps=train.logging_steps,
        eval_strategy=eval_strategy,
        eval_steps=train.eval_steps,
        eval_on_start=train.eval_on_start and has_eval,
        save_strategy="steps" if train.save_steps else "no",
        save_steps=train.save_steps or 500,
        save_total_limit=train.save_total_limit,
        bf16=spec.precision == "bf16",
        fp16=spec.precision == "fp16",
        use_cpu=spec.hardware.accelerator == "cpu",
        torch_compile=spec.compile == "torch",
        report_to=list(spec.report_to) or "none",
        run_name=run_name(spec, Path.cwd()),
        disable_tqdm=True,
        include_num_input_tokens_seen="non_padding",
        # losses comparable across process counts (transformers 5 averages tokens across devices)
        average_tokens_across_devices=False,
        # the loss as it is: on, the Trainer logs a NaN step's loss as the mean of the window's earlier steps, and a
        # window of NaN steps as 0.0, so a diverged run read as one that learned (the run doctor watches the loss)
        logging_nan_inf_filter=False,
    )
    if spec.gradient_checkpointing:  # renamed in transformers 5.2x; the old name warns
        renamed = "activation_checkpointing" in TrainingArguments.__dataclass_fields__
        kwargs["activation_checkpointing" if renamed else "gradient_checkpointing"] = True
    kwargs.update(overrides)
    extra, credentials = trainer_credentials(spec.extra)  # a credential's `$NAME` from the job's environment ...
    os.environ.update(credentials)  # ... reaches the Trainer as HF_TOKEN: TrainingArguments is pickled in checkpoints
    arguments_class = arguments_class or TrainingArguments
    kwargs.update(numbers_where_the_trainer_takes_them(arguments_class, extra))
    return arguments_class(**as_older_transformers_takes(arguments_class, kwargs))


def as_older_transformers_takes(arguments_class: type, kwargs: dict[str, Any]) -> dict[str, Any]:
    """The arguments, written for transformers 5, as an older TrainingArguments takes them (4.56.2, the oldest
    supported: nbtoolkit/train/supported_versions.py); unchanged where the class declares the newer fields."""
    declared = {field.name: declared_kinds(field.type) for field in dataclasses.fields(arguments_class)}
    taken = dict(kwargs)
    # 4.56.2 declares warmup_steps an int (transformers/training_args.py:937) and refuses a float (:1907); a ratio
    # goes in its warmup_ratio (:934). transformers 5 takes both in warmup_steps, and has no warmup_ratio
    warmup = taken.get("warmup_steps")
    if isinstance(warmup, float) and "float" not in declared.get("warmup_steps", {"float"}):
        taken["warmup_steps"], taken["warmup_ratio"] = (0, warmup) if 0 < warmup < 1 else (int(warmup), 0.0)
    # 4.56.2 declares include_num_input_tokens_seen a bool (training_args.py:1510) and, when it is true, counts
    # every input token, padding included (trainer.py:2633-2643): "no" would count and "non_padding" would count
    # the padding. Off there: no tokens/s in the records rather than a wrong one
    if isinstance(taken.get("include_num_input_tokens_seen"), str) and "str" not in declared.get(
        "include_num_input_tokens_seen", {"str"}
    ):
        taken["include_num_input_tokens_seen"] = False
    return taken


def numbers_where_the_trainer_takes_them(arguments_class: type, extra: dict[str, Any]) -> dict[str, Any]:
    """`extra: {weight_decay: 1e-4}`: a spec's YAML reads `1e-4` as text (a float needs its dot, as PyYAML always
    read it), and TrainingArguments takes the text as given (the optimizer then fails on it). A text written as a
    plain ASCII number, for a field declared float (or int), is read as that number; anything else stays as
    written for the Trainer to take or refuse."""
    declared = {field.name: field.type for field in dataclasses.fields(arguments_class)}
    typed = dict(extra)
    for name, value in extra.items():
        if not isinstance(value, str):
            continue
        kinds = declared_kinds(declared.get(name))
        if "float" in kinds and PLAIN_NUMBER.fullmatch(value):
            typed[name] = float(value)
        elif "int" in kinds and PLAIN_INTEGER.fullmatch(value):
            typed[name] = int(value)
    return typed


#: numbers as a person writes them: ASCII digits, an optional dot and exponent; no `1_000`, `inf`, `nan` or `٤٢`
PLAIN_NUMBER = re.compile(r"[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?")
PLAIN_INTEGER = re.compile(r"[-+]?[0-9]+")


def declared_kinds(annotation: Any) -> set[str]:
    """`float`, `"float | None"`, `Optional[int]` -> {"float"} / {"float", "None"} / {"int", "None"}."""
    text = annotation.__name__ if isinstance(annotation, type) else str(annotation)
    return {part.strip() for part in re.split(r"[|\[\],]", text)}


def resume_checkpoint(spec: RunSpec, output_dir: str) -> str | None:
    """The checkpoint to continue from: the spec's path, or with 'latest' the last complete one in output_dir."""
    from nbtoolkit.lineage.checkpoints import is_complete, last_checkpoint
    from nbtoolkit.train.errors import TrainError

    if spec.resume is None:
        return None
    if spec.resume == "latest":
        latest = last_checkpoint(output_dir)
        return str(latest) if latest else None
    path = Path(spec.resume).expanduser()
    if not is_complete(path):
        raise TrainError(
            f"resume: {spec.resume} is not a complete checkpoint (its trainer_state.json or its weights are missing or unreadable); "
            "give a checkpoint-N folder or 'latest'"
        )
    return str(path)


def use_inductor_cache(spec: RunSpec) -> None:
    """torch.compile: keep compiled kernels under NBTOOLKIT_HOME (a cold compile takes 18-59 s, warm 4 s).

    Must run before torch is imported: importing transformers already fixes torch's cache directory.
    """
    if spec.compile == "torch" and not os.environ.get("TORCHINDUCTOR_CACHE_DIR"):
        from nbtoolkit.launching.runtime import default_home

        os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(default_home() / "cache" / "torchinductor")


def unused_integrations(spec: RunSpec) -> tuple[str, ...]:
    """The optional packages this run does not use, which it starts without (hide_unused_integrations).

    transformers' and accelerate's availability checks import DeepSpeed (which brings MLflow with its
    autotuner) and PEFT whenever they are installed: about 2.5 s of CPU in every rank of every run.
    """
    used = {
        "deepspeed": "deepspeed" in spec.extras_used,
        "peft": "adapters" in spec.extras_used,
        "mlflow": "mlflow" in spec.report_to,
        # imported by transformers' object-detection losses whenever a model is: no task here uses those (nor
        # datasets' .mat reader, nor torch's ILP checkpointing solver): about 1 s of CPU in every rank
        "scipy": False,
        # accelerate's SageMaker config imports it (with botocore) whenever it is installed; only MLflow's S3
        # artifact store uses it in a run
        "boto3": "mlflow" in spec.report_to,
    }
    return tuple(package for package, needed in used.items() if not needed)


def hide_unused_integrations(packages: tuple[str, ...]) -> None:
    """Start without these packages, as if they were not installed. Must run before transformers is imported."""
    for package in packages:
        sys.modules.setdefault(package, None)  # import raises ImportError, find_spec answers None


def quiet_libraries() -> None:
    """Warnings only, no progress bars: the log carries our progress lines."""
    import datasets
    import transformers

    transformers.logging.set_verbosity_warning()
    transformers.logging.disable_progress_bar()
    datasets.disable_progress_bars()


def prepared_once_per_node(spec: RunSpec, output_dir: str):
    """The node's first process downloads and tokenizes the data (and fetches the model) while the node's other
    processes wait, then they read its cache: one copy of the work per node, not one per rank (8-32 on the real
    instances). Transformers' own `main_process_first(local=True)`, on the distributed state the Trainer uses."""
    from transformers import TrainingArguments

    ordering = TrainingArguments(output_dir=output_dir, use_cpu=spec.hardware.accelerator == "cpu", report_to="none")
    return ordering.main_process_first(local=True, desc="data preparation")


def run(
    spec: RunSpec, metrics_path: str, output_dir: str, model_dir: str | None = None, model_is_copy: bool = False
) -> dict:
    import transformers
    from transformers import Trainer

    from nbtoolkit.train.callbacks import BudgetCallback, HeartbeatCallback, LearningRateCallback, MetricsCallback
    from nbtoolkit.train.data import load_splits
    from nbtoolkit.train.engines import engine_for
    from nbtoolkit.train.errors import TrainError
    from nbtoolkit.train.task_setup import check_task, setup_task, trainer_arguments

    quiet_libraries()
    os.environ.update(environment(spec, Path.cwd()))  # the trackers' callbacks read it (the job dir is the cwd)
    transformers.set_seed(spec.train.seed)
    check_task(spec)
    with prepared_once_per_node(spec, output_dir):
        splits = load_splits(spec)
        task = setup_task(spec, splits)
    model_dir = model_dir or str(Path(output_dir) / "model")
    if spec.adapter is not None:
        from nbtoolkit.train.adapters import save_base, wrap

        if os.environ.get("RANK", "0") == "0":
            save_base(task.model, spec, model_dir, model_is_copy=model_is_copy)
        task.model = wrap(task.model, spec, task.adapter_targets)
    engine = engine_for(spec)
    if engine.prepare_model is not None:
        task.model = engine.prepare_model(task.model)
    args = training_arguments(
        spec,
        output_dir,
        has_eval=task.eval_dataset is not None,
        arguments_class=task.arguments_class or engine.arguments_class,
        **task.argument_overrides,
        **engine.arguments,
    )
    samples_per_step = args.per_device_train_batch_size * args.gradient_accumulation_steps * args.world_size
    trainer_class = task.trainer_class or engine.trainer_class or Trainer
    trainer = trainer_class(
        model=task.model,
        args=args,
        train_dataset=task.train_dataset,
        eval_dataset=task.eval_dataset,
        processing_class=task.tokenizer,
        **trainer_arguments(task),
        callbacks=[
            MetricsCallback(metrics_path, samples_per_step),
            HeartbeatCallback(Path(metrics_path).resolve().parent),  # the job folder: metrics.jsonl's
            *([LearningRateCallback()] if spec.resume else []),
        ],
    )
    watch = (
        BudgetCallback(metrics_path, spec.train.budget_usd, spec.hardware.run_price_usd)
        if spec.train.budget_usd is not None
        else None
    )
    if watch is not None:
        trainer.add_callback(watch)
    if trainer.is_world_process_zero():
        parameters = sum(p.numel() for p in task.model.parameters())
        trainable = sum(p.numel() for p in task.model.parameters() if p.requires_grad)
        adapter = f", {spec.adapter.type} r={spec.adapter.r}: {trainable / 1e6:.3f}M trainable" if spec.adapter else ""
        print(
            f"[nbtoolkit] {spec.task} | model {spec.model_name} ({parameters / 1e6:.2f}M parameters{adapter}) | "
            f"{len(task.train_dataset)} train / {len(task.eval_dataset or [])} eval examples | "
            f"{args.world_size} process(es) x batch {args.per_device_train_batch_size}",
            flush=True,
        )
    checkpoint = resume_checkpoint(spec, output_dir)
    if checkpoint and trainer.is_world_process_zero():
        print(f"[nbtoolkit] resuming from {checkpoint}", flush=True)
    result = trainer.train(resume_from_checkpoint=checkpoint)
    if watch is not None and watch.stopped:
        return {}  # stopped at its budget: the checkpoint is what it leaves, no final evaluation or model
    if trainer.state.global_step == 0:  # an empty dataloader: the Trainer only warns, and the run would "succeed"
        drop = " (dataloader_drop_last drops a partial one)" if args.dataloader_drop_last else ""
        raise TrainError(
            f"no training step ran: {len(task.train_dataset)} training examples give no full batch of "
            f"{args.per_device_train_batch_size} to each of {args.world_size} process(es){drop}; "
            "give more data or lower train.batch_size"
        )
    final = final_evaluation(trainer) if task.eval_dataset is not None else {}
    trainer.save_model(model_dir)  # with an adapter: the adapter alone (the base is in model_dir/base)
    if trainer.is_world_process_zero():
        shown = ", ".join(
            f"{key} {value:.4f}" if isinstance(value, (int, float)) else f"{key} {value}"  # TRL's NaN mean is None
            for key, value in final.items()
            if key.startswith("eval_") and not key.endswith(("runtime", "per_second"))
        )
        print(
            f"[nbtoolkit] done in {result.metrics.get('train_runtime', 0):.1f}s"
            + (f" | final {shown}" if shown else ""),
            flush=True,
        )
    return final


def final_evaluation(trainer) -> dict:
    """Eval metrics at the last step: reuse an evaluation that just ran there, else run one."""
    history = trainer.state.log_history
    last = next((entry for entry in reversed(history) if "eval_loss" in entry), None)
    if last is not None and last.get("step") == trainer.state.global_step:
        return last
    return trainer.evaluate()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m nbtoolkit.train", description=__doc__)
    parser.add_argument("--spec", required=True, help="spec.json or spec.yaml")
    parser.add_argument("--metrics", default="metrics.jsonl", help="where rank 0 appends metric records")
    parser.add_argument("--output-dir", default="output", help="checkpoints and the final model")
    parser.add_argument(
        "--model-dir",
        default=None,
        help="the final model, when not OUTPUT_DIR/model "
        "(SageMaker uploads /opt/ml/model; checkpoints live in /opt/ml/checkpoints)",
    )
    parser.add_argument(
        "--model",
        default=None,
        help="start from this model folder instead of the spec's model: a copy made for this run "
        "(a SageMaker input channel holding an earlier job's model)",
    )
    parser.add_argument(
        "--data-dir",
        default=None,
        help="read the spec's relative dataset.files below this folder (a SageMaker job's input channels)",
    )
    parser.add_argument("--local_rank", "--local-rank", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    from nbtoolkit.train.errors import TrainError

    try:
        spec = load_spec(Path(args.spec), launched=True)  # its backend checked it at launch
        if args.model:
            if not (config_folder(args.model) / "config.json").is_file():
                raise TrainError(
                    f"the earlier job's model in {args.model} holds no config.json (nor an adapter beside its base): "
                    "that job saved no model to start from (a script must save one to /opt/ml/model)"
                )
            spec = spec.model_copy(update={"model": args.model})
        if args.data_dir and spec.dataset.files:
            files = {split: os.path.join(args.data_dir, path) for split, path in spec.dataset.files.items()}
            spec = spec.model_copy(update={"dataset": spec.dataset.model_copy(update={"files": files})})
        use_inductor_cache(spec)  # both here, in the process's entry point: they change the process for good
        hide_unused_integrations(unused_integrations(spec))
        run(spec, args.metrics, args.output_dir, args.model_dir, model_is_copy=args.model is not None)
    except (SpecError, TrainError) as exc:
        if os.environ.get("RANK", "0") == "0":
            print(f"{ERROR_PREFIX} {exc}", file=sys.stderr, flush=True)
        return 2
    return 0
