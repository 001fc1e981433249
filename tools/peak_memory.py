"""Peak memory of an example notebook run top to bottom as it is committed (smoke mode): the kernel and
every process it starts (job supervisors, torchrun and DeepSpeed workers), against Binder's ~2 GB.

    .venv/bin/python tools/peak_memory.py notebooks/flan-t5-deepspeed-plan.ipynb

Prints the peak of the summed RSS (shared pages counted in each process: an upper bound) and of the
summed PSS (shared pages split between the processes: what a memory limit sees), sampled every 0.2 s.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import threading
import time
from pathlib import Path

import nbformat
import psutil
from nbclient import NotebookClient

MB = 1024 * 1024


def tree_memory() -> tuple[int, int]:
    """Summed RSS and PSS of every process below this one (the kernel is a child of nbclient's)."""
    rss = pss = 0
    for process in psutil.Process().children(recursive=True):
        try:
            memory = process.memory_full_info()
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue  # ended between listing and reading
        rss, pss = rss + memory.rss, pss + memory.pss
    return rss, pss


class PeakSampler(threading.Thread):
    """Samples tree_memory() until stopped, keeping the largest sums seen."""

    def __init__(self, every_s: float = 0.2) -> None:
        super().__init__(daemon=True)
        self.every_s, self.rss, self.pss = every_s, 0, 0
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.is_set():
            rss, pss = tree_memory()
            self.rss, self.pss = max(self.rss, rss), max(self.pss, pss)
            self.stopped.wait(self.every_s)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebook", type=Path)
    parser.add_argument("--timeout", type=int, default=1200, help="seconds one cell may take")
    args = parser.parse_args()
    notebook = nbformat.read(args.notebook, as_version=4)
    with tempfile.TemporaryDirectory() as work:
        # a job store of its own, offline, as the tests run the notebooks; the notebook runs in its own folder,
        # as on Binder and in `make notebooks` (its cells name files beside it, e.g. specs/)
        os.environ.update(NBTOOLKIT_HOME=str(Path(work) / "home"), HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1")
        sampler = PeakSampler()
        sampler.start()
        started = time.monotonic()
        try:
            NotebookClient(
                notebook,
                timeout=args.timeout,
                kernel_name="python3",
                resources={"metadata": {"path": str(args.notebook.resolve().parent)}},
            ).execute()
        finally:
            sampler.stopped.set()
            sampler.join()
    print(
        f"{args.notebook.name}: ran in {time.monotonic() - started:.0f}s; peak of kernel + children: "
        f"RSS {sampler.rss / MB:.0f} MB, PSS {sampler.pss / MB:.0f} MB"
    )


if __name__ == "__main__":
    main()
