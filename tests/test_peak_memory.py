"""tools/peak_memory.py counts the memory of every process below it, children of children included."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

TOOL = Path(__file__).resolve().parent.parent / "tools" / "peak_memory.py"
spec = importlib.util.spec_from_file_location("peak_memory", TOOL)
peak_memory = importlib.util.module_from_spec(spec)
spec.loader.exec_module(peak_memory)

#: a grandchild that fills 300 MB (written, so resident), says so, and waits to be told to end
GRANDCHILD = (
    "import sys; block = bytearray(300 * 2**20); block[::4096] = b'x' * len(block[::4096]); "
    "print('full', flush=True); sys.stdin.readline()"
)


def test_the_peak_includes_a_grandchild_that_holds_memory_for_a_moment():
    sampler = peak_memory.PeakSampler(every_s=0.05)
    sampler.start()
    child = subprocess.Popen(
        [sys.executable, "-c", f"import subprocess, sys; subprocess.run([sys.executable, '-c', {GRANDCHILD!r}])"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout.readline() == "full\n"
    sampler.stopped.wait(0.3)
    child.communicate("\n", timeout=30)
    sampler.stopped.set()
    sampler.join()
    assert sampler.rss >= 300 * peak_memory.MB and sampler.pss >= 300 * peak_memory.MB
