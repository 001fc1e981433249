"""Each launcher on CPU: wall time of a job and its steady-state samples/s, against one process.

Every case trains the bundled tiny BERT on the same global batch (16) for the same steps, as a
real job (submit -> supervisor -> ranks). Wall time counts everything a user waits for: start-up
(imports, rendezvous, DeepSpeed init), training, the final eval and the save. Samples/s is the
steady state (the first logging window left out). Prints the load average too: on a shared
machine, the numbers move with it. The distributed cases run one thread per worker
(OMP_NUM_THREADS=1); `local` uses torch's default threads unless OMP_NUM_THREADS is set, which on
a busy machine changes its speed several times over.

    .venv/bin/python benchmarks/launchers.py [--steps 200] [--cases local ddp zero3]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

from nbtoolkit.api import launch
from nbtoolkit.metrics.throughput import steady_state
from nbtoolkit.runner import JobStore

DEEPSPEED = {"strategy": "deepspeed"}
CASES = {
    "local": {"hardware": {"devices": 1}, "batch": 16},
    "ddp": {"hardware": {"devices": 2}},
    "zero2": {"parallelism": {**DEEPSPEED, "zero_stage": 2}},
    "zero2-offload": {"parallelism": {**DEEPSPEED, "zero_stage": 2, "offload_optimizer": "cpu"}},
    "zero3": {"parallelism": {**DEEPSPEED, "zero_stage": 3}},
    "zero3-offload": {
        "parallelism": {**DEEPSPEED, "zero_stage": 3, "offload_optimizer": "cpu", "offload_params": "cpu"}
    },
    "zero2-ds-launcher": {"launcher": "deepspeed", "parallelism": {**DEEPSPEED, "zero_stage": 2}},
}


def case_spec(name: str, steps: int) -> dict:
    case = dict(CASES[name])
    batch = case.pop("batch", 8)
    return {
        "name": f"bench-{name}",
        "task": "text-classification",
        "hardware": {"devices": 2},
        **case,
        "train": {
            "max_steps": steps,
            "batch_size": batch,
            "learning_rate": 0.005,
            "logging_steps": steps // 10,
            "seed": 7,
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--cases", nargs="+", choices=list(CASES), default=list(CASES))
    args = parser.parse_args()
    store = JobStore(tempfile.mkdtemp(prefix="nbtoolkit-bench-"))
    print(f"{os.cpu_count()} CPUs; load average before: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print(f"{'case':<18} {'wall s':>7} {'samples/s':>10} {'vs local':>9} {'final loss':>11}")
    baseline = None
    for name in args.cases:
        started = time.monotonic()
        job = launch(case_spec(name, args.steps), store=store)
        status = job.wait()
        wall = time.monotonic() - started
        records = job.records()
        speed = steady_state(records).samples_per_second
        train = [r for r in records if r["kind"] == "train"]
        if name == "local":
            baseline = speed
        ratio = f"{speed / baseline:.2f}x" if speed and baseline else ""
        loss = f"{train[-1]['loss']:.4f}" if train else status
        print(f"{name:<18} {wall:>7.1f} {speed or 0:>10.1f} {ratio:>9} {loss:>11}", flush=True)
    print(f"load average after: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
