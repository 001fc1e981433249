"""What `%load_ext nbtoolkit` registers: the `%finetune` family of magics.

`%finetune` (flags) and `%%finetune` (a YAML spec, flags override it) launch a run; `--dry-run`
shows what would start, `--form` opens the form prefilled. `%jobs`, `%job`, `%finetune_stop` and
`%finetune_compare` watch and end runs. Flags become a spec dict in one place, `spec_data`, and
every spec goes through `load_spec`; the form builds the same dict.
"""

from __future__ import annotations

import copy
import importlib
from pathlib import Path
from typing import Any

import yaml
from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring

from nbtoolkit.notebook.job_view import show_job
from nbtoolkit.notebook.spec_fields import choices, remove_value, set_value
from nbtoolkit.rewards import kernel_rewards
from nbtoolkit.runner.store import STATUSES
from nbtoolkit.spec import SpecError, load_spec
from nbtoolkit.spec_parts.trackers import describe as describe_trackers
from nbtoolkit.spec_parts.yaml_reading import merged, parse_settings, read_yaml
from nbtoolkit.tasks import TASK_NAMES

#: module -> IPython Magics class registered by `%load_ext nbtoolkit`
MAGIC_CLASSES: dict[str, str] = {
    "nbtoolkit.notebook.magics": "FinetuneMagics",
    "nbtoolkit.notebook.capture": "CaptureMagics",
}


def register(ipython) -> None:
    for module, name in MAGIC_CLASSES.items():
        ipython.register_magics(getattr(importlib.import_module(module), name))


#: flag (argparse dest) -> the spec field it sets, value as given
FLAG_FIELDS: dict[str, str] = {
    "name": "name",
    "task": "task",
    "model": "model",
    "dataset_config": "dataset.config",
    "text_column": "dataset.text_column",
    "label_column": "dataset.label_column",
    "max_length": "dataset.max_length",
    "target": "hardware.target",
    "accelerator": "hardware.accelerator",
    "instance_type": "hardware.instance_type",
    "nproc": "hardware.devices",
    "nodes": "hardware.nodes",
    "launcher": "launcher",
    "strategy": "parallelism.strategy",
    "zero": "parallelism.zero_stage",
    "precision": "precision",
    "compile": "compile",
    "epochs": "train.epochs",
    "steps": "train.max_steps",
    "batch_size": "train.batch_size",
    "grad_accum": "train.grad_accum",
    "lr": "train.learning_rate",
    "warmup": "train.warmup",
    "seed": "train.seed",
    "logging_steps": "train.logging_steps",
    "eval_steps": "train.eval_steps",
    "save_steps": "train.save_steps",
    "budget_usd": "train.budget_usd",
    "role": "sagemaker.role",
    "region": "sagemaker.region",
    "lora": "adapter.r",
}


def spec_data(args: Any, base: dict[str, Any] | None = None) -> dict[str, Any]:
    """The spec dict that `%finetune` flags describe, on top of `base` (a `--spec` file or cell body)."""
    data = copy.deepcopy(base or {})
    for dest, path in FLAG_FIELDS.items():
        if getattr(args, dest) is not None:
            set_value(data, path, getattr(args, dest))
    if args.dataset is not None:
        local = Path(args.dataset).suffix or Path(args.dataset).expanduser().exists()
        remove_value(data, "dataset.name")
        remove_value(data, "dataset.files")
        set_value(data, "dataset.files.train" if local else "dataset.name", args.dataset)
    if args.eval_file is not None:
        set_value(data, "dataset.files.validation", args.eval_file)
    if args.zero is not None and args.strategy is None:
        set_value(data, "parallelism.strategy", "deepspeed")
    if args.offload is not None:
        set_value(data, "parallelism.offload_optimizer", "cpu")
        if args.offload == "all":
            set_value(data, "parallelism.offload_params", "cpu")
    if args.bf16:
        set_value(data, "precision", "bf16")
    if args.spot:
        set_value(data, "sagemaker.spot", True)
    for field, value in parse_settings(args.set or []).items():
        set_value(data, field, value)
    return data


def base_spec(path: str | None, cell: str | None) -> dict[str, Any]:
    """The spec the flags start from: a `--spec` file, with a `%%finetune` body on top of it."""
    data = load_spec(Path(path).expanduser()).to_dict() if path else {}
    if cell and cell.strip():
        data = merged(data, _yaml_mapping(cell))
    return data


def _yaml_mapping(text: str) -> dict[str, Any]:
    try:
        body = read_yaml(text)
    except yaml.YAMLError:
        body = None
    if not isinstance(body, dict):
        load_spec(text)  # raises the sentence every front shows for a body that is not a YAML mapping
    return body


def _job(job_id: str):
    from nbtoolkit.api import Job

    return Job(job_id.strip())


@magics_class
class FinetuneMagics(Magics):
    """`%finetune`, `%%finetune`, `%jobs`, `%job`, `%finetune_stop`, `%finetune_compare`."""

    @magic_arguments()
    @argument("--spec", metavar="FILE", help="start from this spec file (YAML or JSON); flags override it")
    @argument("--name", help="a name for the run (default: task-model)")
    @argument("--task", choices=TASK_NAMES, help="what to fine-tune for")
    @argument("--model", help="hub id or local path (default: the bundled tiny model for the task)")
    @argument(
        "--dataset",
        metavar="NAME_OR_FILE",
        help="a hub dataset id, or a local .jsonl/.json/.csv/.parquet file for the train split "
        "(default: the bundled sample data)",
    )
    @argument("--eval-file", metavar="FILE", help="a local file for the validation split")
    @argument("--dataset-config", metavar="CONFIG", help="hub dataset config, e.g. 3.0.0")
    @argument("--text-column", metavar="COLUMN", help="the column holding the input text")
    @argument("--label-column", metavar="COLUMN", help="the column holding the label (classification)")
    @argument("--max-length", type=int, metavar="TOKENS", help="max source tokens")
    @argument(
        "--target",
        choices=choices("hardware.target"),
        help="where it runs: here (local) or a remote engine (sagemaker, slurm, ...)",
    )
    @argument("--accelerator", choices=choices("hardware.accelerator"), help="the devices the run uses")
    @argument("--instance-type", metavar="TYPE", help="e.g. ml.g5.2xlarge (SageMaker) or trn1.2xlarge")
    @argument("--nproc", type=int, metavar="N", help="processes (devices) per node")
    @argument("--nodes", type=int, metavar="N", help="number of nodes")
    @argument("--launcher", choices=choices("launcher"), help="how to start the processes (default: auto)")
    @argument("--strategy", choices=choices("parallelism.strategy"), help="how work is split across devices")
    @argument(
        "--zero",
        type=int,
        choices=choices("parallelism.zero_stage"),
        help="DeepSpeed ZeRO stage (implies --strategy deepspeed)",
    )
    @argument(
        "--offload",
        choices=("optimizer", "all"),
        help="DeepSpeed offload to CPU: optimizer states, or all (parameters too; needs --zero 3)",
    )
    @argument("--precision", choices=choices("precision"), help="number format for training (default fp32)")
    @argument("--bf16", action="store_true", help="shorthand for --precision bf16")
    @argument(
        "--compile",
        nargs="?",
        const="torch",
        choices=choices("compile"),
        help="compile the model: torch (the default when given alone) or neuron",
    )
    @argument("--epochs", type=float, help="passes over the training data")
    @argument("--steps", type=int, metavar="N", help="train for N optimizer steps (overrides --epochs)")
    @argument("--batch-size", type=int, metavar="N", help="per device")
    @argument("--grad-accum", type=int, metavar="N", help="gradient accumulation steps")
    @argument("--lr", type=float, metavar="RATE", help="learning rate")
    @argument("--warmup", type=float, metavar="STEPS_OR_RATIO", help="warm-up steps (>= 1) or ratio (< 1)")
    @argument("--seed", type=int, help="random seed (data order, initialisation)")
    @argument("--logging-steps", type=int, metavar="N", help="log (and chart) every N steps")
    @argument("--eval-steps", type=int, metavar="N", help="evaluate every N steps (default: each epoch)")
    @argument("--save-steps", type=int, metavar="N", help="checkpoint every N steps (default: none)")
    @argument(
        "--budget-usd",
        type=float,
        metavar="USD",
        help="stop with a checkpoint once training has cost this "
        "much (needs a price: hardware.hourly_price_usd or a priced instance type)",
    )
    @argument("--lora", type=int, metavar="R", help="train LoRA adapters of rank R instead of every weight")
    @argument("--role", metavar="ARN", help="SageMaker: the IAM role the job runs as")
    @argument("--region", help="SageMaker: AWS region")
    @argument("--spot", action="store_true", help="SageMaker: use spot capacity")
    @argument(
        "--set",
        action="append",
        metavar="FIELD=VALUE",
        help="any other spec field by its dotted name, value read as YAML; repeatable "
        "(e.g. --set dataset.pad_to_max_length=true)",
    )
    @argument(
        "--dry-run",
        action="store_true",
        help="show the spec, the command (run.sh), generated files and checks; start nothing",
    )
    @argument("--form", action="store_true", help="open the configuration form with this spec filled in")
    @argument(
        "--rehearse",
        action="store_true",
        help="run this spec's launch here on a tiny model of the same architecture for a few steps, "
        "and report each stage; start nothing that costs money",
    )
    @line_cell_magic
    def finetune(self, line: str, cell: str | None = None):
        """Launch a fine-tuning run described by flags, a `%%finetune` YAML body, or both.

        `job = %finetune --task text-classification --steps 50` trains the bundled tiny model on
        the sample data and returns its Job handle, which shows itself as a live chart. In
        `%%finetune`, the cell body is a RunSpec in YAML and flags on the magic line override it.
        """
        from nbtoolkit.backends import LaunchError

        args = parse_argstring(self.finetune, line)
        try:
            data = kernel_rewards(spec_data(args, base_spec(args.spec, cell)), self.shell.user_ns)
            if args.form:
                from nbtoolkit.notebook.form import SpecForm

                return SpecForm(data)
            if args.dry_run:
                from nbtoolkit.notebook.preview import preview, quiet_load

                return preview(quiet_load(data))
            if args.rehearse:
                from nbtoolkit.rehearsal.rehearse import rehearse

                return rehearse(load_spec(data))
            from nbtoolkit.api import launch

            job = launch(load_spec(data))
        except (SpecError, LaunchError) as exc:
            raise UsageError(str(exc)) from None
        record = job.record
        print(
            f"job {record.id} ({record.name}, {record.backend}) launched; "
            f"%job {record.id} shows it, %finetune_stop {record.id} stops it"
        )
        return job

    @magic_arguments()
    @argument("--status", choices=STATUSES)
    @argument("--limit", type=int, default=20, help="at most this many, newest first (default 20)")
    @line_magic
    def jobs(self, line: str):
        """The jobs table: name, backend, status, progress, last loss, throughput, started, ended."""
        import pandas as pd

        from nbtoolkit.runner import JobStore
        from nbtoolkit.runner.listing import listing_row

        args = parse_argstring(self.jobs, line)
        rows = [
            listing_row(record) for record in JobStore().list([args.status] if args.status else None, limit=args.limit)
        ]
        if not rows:
            print("no jobs yet; %finetune or nbtoolkit.launch(spec) starts one")
            return None
        return pd.DataFrame(rows).set_index("id")

    @magic_arguments()
    @argument("job_id", metavar="ID", help="job id or a unique prefix")
    @argument("--tail", type=int, default=20, metavar="N", help="show the last N log lines (default 20)")
    @argument("--log-scale", action="store_true", help="loss on a log scale")
    @line_magic
    def job(self, line: str) -> None:
        """One job: its live chart (a succeeded one's Try it box below it), then the tail of its log."""
        from nbtoolkit.runner import JobNotFound
        from nbtoolkit.runner.health import training_warning
        from nbtoolkit.runner.listing import listing_row

        args = parse_argstring(self.job, line)
        try:
            job = _job(args.job_id)
        except JobNotFound as exc:
            raise UsageError(str(exc)) from None
        from nbtoolkit.metrics.forecast import comparison_lines

        row = listing_row(job.record)
        print("  ".join(f"{key} {value}" for key, value in row.items() if value))
        if warning := training_warning(job.record):
            print(f"warning: {warning}")
        print("\n".join(comparison_lines(job.record, job.records())))
        for tracked in describe_trackers(job.spec, job.dir):
            print(f"tracking: {tracked}")
        show_job(job, log_scale=args.log_scale)
        print(f"--- last {args.tail} lines of {job.dir / 'output.log'}\n{job.logs(tail=args.tail)}")

    @line_magic
    def finetune_stop(self, line: str) -> None:
        """`%finetune_stop ID`: stop a job and every process it started."""
        from nbtoolkit.runner import JobNotFound

        if not line.strip():
            raise UsageError("%finetune_stop needs a job id; %jobs lists them")
        try:
            job = _job(line)
            print(f"job {job.id} {job.stop()}")
        except JobNotFound as exc:
            raise UsageError(str(exc)) from None

    @magic_arguments()
    @argument("job_ids", nargs="+", metavar="ID", help="jobs to compare (ids or unique prefixes)")
    @argument(
        "--baseline", metavar="ID", help="the job speed-up and time saved are measured against (default: the first)"
    )
    @argument("--warmup-steps", type=int, metavar="N", help="steady state starts after this step")
    @line_magic
    def finetune_compare(self, line: str):
        """`%finetune_compare ID ID ...`: throughput, time, loss and cost side by side, with figures."""
        from nbtoolkit.metrics.compare import compare
        from nbtoolkit.runner import JobNotFound

        args = parse_argstring(self.finetune_compare, line)
        try:
            jobs = [_job(job_id) for job_id in args.job_ids]
            baseline = _job(args.baseline) if args.baseline else jobs[0]
        except JobNotFound as exc:
            raise UsageError(str(exc)) from None
        ids = [job.id for job in jobs]
        if baseline.id not in ids:
            jobs.insert(0, baseline)
            ids.insert(0, baseline.id)
        return compare(jobs, baseline=ids.index(baseline.id), warmup_steps=args.warmup_steps)
