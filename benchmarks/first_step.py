"""Submit -> first training step (or the last record -> the job's end), this working tree against a git ref, ABBA.

    python benchmarks/first_step.py [--base a5f7a9d] [--tree REF] [--pairs 4] [--devices 1] [--strategy deepspeed]
                                    [--figure first_step_s|end_s]

The base (and `--tree`, when given instead of the working tree) is checked out as a detached
`git worktree` in a temporary folder; each run is a fresh
Python process whose PYTHONPATH puts one tree first, so the supervisor and the training program
it starts (they inherit the environment) run that tree's code on the same venv. A run launches the
bundled text-classification job (logging every step) in a fresh job store and measures from the
`launch()` call to the time of the first train record in metrics.jsonl (the callback writes it at
the end of step 1); `--figure end_s` measures from the summary record (training done) to the job's recorded
end instead: how long the processes take to exit and the supervisor to see it. Each tree runs once first, not counted, to write its bytecode. Pairs run
A B B A (A = base); a pair's ratio is (B1 + B2) / (A1 + A2), so under 1 means the tree starts faster.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: one run in a fresh process: the seconds from launch() to the first train record, printed as JSON
RUN = """
import json, sys, time
from nbtoolkit.api import launch
spec = {"task": "text-classification", "train": {"max_steps": 3, "logging_steps": 1},
        "hardware": {"devices": int(sys.argv[1])}, "parallelism": {"strategy": sys.argv[2]}}
start = time.time()
job = launch(spec)
status = job.wait(timeout=600)
train = [record for record in job.records() if record.get("kind") == "train"]
if status != "succeeded" or not train:
    sys.exit(f"job {job.id} {status}: {job.logs(tail=20)}")
trained = [record for record in job.records() if record.get("kind") == "summary"][-1]["time"]
print(json.dumps({"first_step_s": train[0]["time"] - start, "end_s": job.record.ended - trained}))
"""


def one_run(tree: Path, devices: int, strategy: str) -> dict[str, float]:
    env = {
        **os.environ,
        "PYTHONPATH": str(tree),
        "NBTOOLKIT_HOME": tempfile.mkdtemp(prefix="nbtoolkit-first-step-"),
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
    }
    done = subprocess.run(
        [sys.executable, "-c", RUN, str(devices), strategy],
        env=env,
        cwd=tempfile.gettempdir(),
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise SystemExit(f"a run on {tree} failed: {done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", default="a5f7a9d", help="the git ref to compare against (A)")
    parser.add_argument("--tree", default=None, help="a git ref to measure (B) instead of the working tree")
    parser.add_argument("--pairs", type=int, default=4)
    parser.add_argument("--devices", type=int, default=1, help="processes of the job (2: torchrun)")
    parser.add_argument("--strategy", default="none", help="the spec's parallelism.strategy (deepspeed: its launcher)")
    parser.add_argument(
        "--figure",
        default="first_step_s",
        choices=("first_step_s", "end_s"),
        help="what is compared: launch() -> first train record, or the last record -> the job's end",
    )
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a `timeout` still removes the worktrees
    with tempfile.TemporaryDirectory(prefix="nbtoolkit-first-step-") as folder:
        trees = {"A": Path(folder) / "base", "B": Path(folder) / "tree" if args.tree else ROOT}
        for name, ref in (("A", args.base), ("B", args.tree)):
            if ref:
                subprocess.run(
                    ["git", "-C", str(ROOT), "worktree", "add", "-q", "--detach", str(trees[name]), ref], check=True
                )
        try:
            for tree in trees.values():
                one_run(tree, args.devices, args.strategy)  # bytecode, page cache
            ratios = []
            for pair in range(1, args.pairs + 1):
                runs = {name: [] for name in trees}
                for name in "ABBA":
                    runs[name].append(one_run(trees[name], args.devices, args.strategy)[args.figure])
                ratio = sum(runs["B"]) / sum(runs["A"])
                ratios.append(ratio)
                print(
                    f"pair {pair}: base {runs['A'][0]:.2f} s, {runs['A'][1]:.2f} s; "
                    f"tree {runs['B'][0]:.2f} s, {runs['B'][1]:.2f} s; ratio {ratio:.3f}",
                    flush=True,
                )
            print(f"{args.figure}, tree/base: median {statistics.median(ratios):.3f} over {len(ratios)} pairs")
        finally:
            for tree in trees.values():
                if tree != ROOT:
                    subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], check=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
