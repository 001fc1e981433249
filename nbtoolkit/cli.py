"""The `nbtoolkit` command: run, watch, stop and export fine-tuning jobs from a terminal."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import warnings
from pathlib import Path

from nbtoolkit.api import Job, launch
from nbtoolkit.backends import LaunchError
from nbtoolkit.jobs import JobNotFound, JobStore, follow_log, read_log, stop
from nbtoolkit.jobs.listing import format_table, listing_row
from nbtoolkit.planner.shapes import ModelShapeError
from nbtoolkit.spec import SpecError, load_spec

DEMO_SPEC = {
    "name": "demo-emotion-tiny-bert",
    "task": "text-classification",
    "train": {"epochs": 4, "batch_size": 16, "learning_rate": 0.002, "logging_steps": 25, "eval_on_start": True},
}


def follow(job: Job) -> int:
    """Print the job's log as it grows; Ctrl-C detaches without stopping the job."""
    try:
        for text in follow_log(job.id, store=job.store):
            sys.stdout.write(text)
            sys.stdout.flush()
    except KeyboardInterrupt:
        print(f"\ndetached; job {job.id} keeps running (`nbtoolkit stop {job.id}` ends it)")
        return 130
    record = job.record
    print(f"job {record.id} {record.status}" + (f": {record.message}" if record.message else ""))
    return 0 if record.status == "succeeded" else 1


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
    return follow(job) if args.follow else 0


def cmd_demo(args: argparse.Namespace) -> int:
    print("fine-tuning a tiny BERT on the bundled emotion sentences (offline, CPU)")
    job = launch(DEMO_SPEC)
    started(job)
    code = follow(job)
    evals = [record for record in job.records() if record.get("kind") == "eval"]
    if code == 0 and len(evals) >= 2:
        print(f"accuracy {evals[0]['eval_accuracy']:.3f} before training -> {evals[-1]['eval_accuracy']:.3f} after")
    return code


def cmd_jobs(args: argparse.Namespace) -> int:
    records = JobStore().list([args.status] if args.status else None, limit=args.limit)
    rows = [listing_row(record) for record in records]
    print(json.dumps(rows, indent=2) if args.json else format_table(rows))
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    job = Job(args.job)
    record = job.record
    if args.json:
        print(json.dumps({**record.to_dict(), "dir": str(job.dir)}, indent=2))
        return 0
    for key, value in {**listing_row(record), "dir": job.dir, "message": record.message or "",
                       "exit code": "" if record.exit_code is None else record.exit_code}.items():
        print(f"{key:>10}: {value}")
    evals = [metric for metric in job.records() if metric.get("kind") == "eval"]
    if evals:
        shown = {key: value for key, value in evals[-1].items() if key.startswith("eval_")}
        print(f"{'last eval':>10}: " + ", ".join(f"{key} {value:.4g}" for key, value in shown.items()
                                                     if isinstance(value, (int, float))))
    return 0


def cmd_logs(args: argparse.Namespace) -> int:
    job = Job(args.job)
    if args.follow:
        return follow(job)
    text, _ = read_log(job.id, store=job.store)
    sys.stdout.write(text)
    return 0


def cmd_stop(args: argparse.Namespace) -> int:
    record = stop(args.job)
    print(f"job {record.id} {record.status}")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from nbtoolkit import backends
    from nbtoolkit.jobs import write_launch_files

    spec = load_spec(args.spec)
    launch_ = backends.render(spec)
    out = Path(args.out or f"nbtoolkit-export-{spec.display_name}")
    written = write_launch_files(launch_, out)
    print(f"# {launch_.backend} launch of {spec.display_name}")
    print(f"# command: {launch_.command}")
    print(f"# files written to {out}/: {', '.join(path.name for path in written)}")
    print(f"# run it with: {shlex.quote(str(out / 'run.sh'))}\n")
    print(launch_.run_sh(), end="")
    return 0


def cmd_plan(args: argparse.Namespace) -> int:
    from nbtoolkit.planner import plan

    result = plan(args.spec, measured=args.measured, dataset_size=args.dataset_size, utilisation=args.utilisation)
    print(json.dumps(result.to_json_dict()) if args.json else "\n".join(result.summary_lines()))
    return 1 if result.fits is False else 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="nbtoolkit", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = commands.add_parser("run", help="start a job from a spec file")
    run.add_argument("spec", help="spec.yaml or spec.json")
    run.add_argument("--follow", "-f", action="store_true", help="print the log until the job ends")
    run.add_argument("--force", action="store_true", help="launch even if the planner predicts it will not fit")
    run.set_defaults(handler=cmd_run)

    plan_ = commands.add_parser("plan", help="will it fit, how long, how much (exit 1 if it will not fit)")
    plan_.add_argument("spec", help="spec.yaml or spec.json")
    plan_.add_argument("--json", action="store_true", help="print one JSON object")
    plan_.add_argument("--measured", type=float, metavar="SAMPLES_PER_S",
                       help="samples/s of a real run of this setup; replaces the assumed utilisation")
    plan_.add_argument("--dataset-size", type=int, metavar="N", help="training examples per epoch")
    plan_.add_argument("--utilisation", type=float, help="fraction of peak FLOP/s to assume (default 0.35)")
    plan_.set_defaults(handler=cmd_plan)

    demo = commands.add_parser("demo", help="fine-tune the bundled tiny model offline and show the result")
    demo.set_defaults(handler=cmd_demo)

    listing = commands.add_parser("jobs", help="list jobs, newest first")
    listing.add_argument("--status", choices=["queued", "running", "succeeded", "failed", "stopped", "lost"])
    listing.add_argument("--limit", type=int, default=50)
    listing.add_argument("--json", action="store_true")
    listing.set_defaults(handler=cmd_jobs)

    show = commands.add_parser("show", help="one job's status, progress and last eval")
    show.add_argument("job", help="job id or a unique prefix")
    show.add_argument("--json", action="store_true")
    show.set_defaults(handler=cmd_show)

    logs = commands.add_parser("logs", help="a job's log")
    logs.add_argument("job")
    logs.add_argument("--follow", "-f", action="store_true")
    logs.set_defaults(handler=cmd_logs)

    stop_ = commands.add_parser("stop", help="stop a job and every process it started")
    stop_.add_argument("job")
    stop_.set_defaults(handler=cmd_stop)

    export = commands.add_parser("export", help="write the launch files and run.sh without starting anything")
    export.add_argument("spec")
    export.add_argument("--out", help="directory to write (default ./nbtoolkit-export-NAME)")
    export.set_defaults(handler=cmd_export)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.handler(args)
    except (SpecError, LaunchError, JobNotFound, ModelShapeError) as exc:
        print(f"nbtoolkit: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
