"""How long `Job.predict` takes on a finished tiny job: the first call (starts the job's model process: torch and
the model load) against the next ones (the same warm process answers).

    python benchmarks/warm_predict.py [--task chat] [--calls 5]

Prints the first call's seconds and the median, min and max of the later ones.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ["NBTOOLKIT_HOME"] = tempfile.mkdtemp(prefix="nbtoolkit-bench-")

from nbtoolkit.api import launch

INPUTS = {
    "chat": [[{"role": "user", "content": "What is the capital of France?"}]],
    "text-classification": ["i feel wonderful and happy today"],
    "causal-lm": ["The bridge over the river"],
}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--task", default="chat", choices=sorted(INPUTS))
    parser.add_argument("--calls", type=int, default=5)
    options = parser.parse_args()
    job = launch({"task": options.task, "train": {"max_steps": 2, "logging_steps": 1}})
    if job.wait(timeout=600) != "succeeded":
        raise SystemExit(job.logs(tail=20))
    seconds = []
    for _ in range(options.calls + 1):
        start = time.perf_counter()
        job.predict(INPUTS[options.task])
        seconds.append(time.perf_counter() - start)
    later = seconds[1:]
    print(f"{options.task}: first predict {seconds[0]:.2f}s (starts the model process)")
    print(
        f"{options.task}: next {len(later)}: median {statistics.median(later):.3f}s (min {min(later):.3f}s, max {max(later):.3f}s)"
    )


if __name__ == "__main__":
    main()
