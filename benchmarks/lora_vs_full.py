"""LoRA against a full fine-tune of the bundled tiny GPT-2, side by side: trainable parameters, peak memory, samples/s.

Both cases are the same spec (causal-lm on the bundled sample, same steps, batch and seed) run as
real jobs on CPU, one after the other; the LoRA case adds `adapter: {r: 8}` (c_attn wrapped, the
GPT-2 family's default). Trainable parameters come from the job's start line, peak memory (the
process's peak resident set, so imports count too) and steady-state samples/s from its summary
record. On a shared machine the speeds move with the load average, printed before and after.

    .venv/bin/python benchmarks/lora_vs_full.py [--steps 200]
"""

from __future__ import annotations

import argparse
import os
import re
import tempfile

from nbtoolkit.api import launch
from nbtoolkit.runner import JobStore

CASES = {"full": None, "LoRA r=8": {"r": 8}}
START_LINE = re.compile(r"\(([\d.]+)M parameters(?:, \w+ r=\d+: ([\d.]+)M trainable)?\)")


def case_spec(name: str, steps: int) -> dict:
    spec = {
        "name": f"bench-{name.split()[0].lower()}",
        "task": "causal-lm",
        "train": {
            "max_steps": steps,
            "batch_size": 8,
            "learning_rate": 0.003,
            "logging_steps": max(steps // 10, 1),
            "seed": 7,
        },
    }
    return {**spec, "adapter": CASES[name]} if CASES[name] else spec


def load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    args = parser.parse_args()
    store = JobStore(tempfile.mkdtemp(prefix="nbtoolkit-bench-"))
    print(f"{os.cpu_count()} CPUs; load average before: {load()}")
    print(f"{'case':<10} {'params M':>9} {'trainable M':>12} {'peak MB':>8} {'samples/s':>10} {'final loss':>11}")
    for name in CASES:
        job = launch(case_spec(name, args.steps), store=store)
        status = job.wait()
        if status != "succeeded":
            print(f"{name:<10} {status}: {job.record.message}")
            continue
        total, trainable = START_LINE.search(job.logs()).groups()
        records = job.records()
        (summary,) = [record for record in records if record["kind"] == "summary"]
        loss = [record["loss"] for record in records if record["kind"] == "train"][-1]
        print(
            f"{name:<10} {float(total):>9.3f} {float(trainable or total):>12.3f} {summary['peak_memory_mb']:>8.0f} "
            f"{summary['steady_samples_per_second']:>10.1f} {loss:>11.4f}"
        )
    print(f"load average after: {load()}")


if __name__ == "__main__":
    main()
