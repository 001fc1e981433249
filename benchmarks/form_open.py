"""How long `%load_ext nbtoolkit` plus showing the form takes in a fresh kernel (target: < 0.5 s).

Each round starts a new IPython kernel (cold imports, as a user's first cell sees them), then
times, inside the kernel, `%load_ext nbtoolkit` and displaying `%finetune --form`, and checks
that no torch/transformers got imported. Run: `.venv/bin/python benchmarks/form_open.py [ROUNDS]`.
"""

from __future__ import annotations

import json
import os
import statistics
import sys

from jupyter_client.manager import start_new_kernel

TARGET_S = 0.5
CELL = """
import json, sys, time
from IPython.display import display
_start, _cpu = time.perf_counter(), time.process_time()
get_ipython().run_line_magic("load_ext", "nbtoolkit")
_loaded = time.perf_counter()
display(get_ipython().run_line_magic("finetune", "--form --steps 20"))
_shown = time.perf_counter()
print(json.dumps({"load_ext": _loaded - _start, "total": _shown - _start, "cpu": time.process_time() - _cpu,
                  "heavy": sorted({"torch", "transformers", "deepspeed", "sagemaker"} & set(sys.modules))}))
"""


def one_round() -> dict:
    manager, client = start_new_kernel(kernel_name="python3")
    try:
        printed = []
        reply = client.execute_interactive(CELL, timeout=60, output_hook=lambda msg: printed.append(msg))
        if reply["content"]["status"] != "ok":
            raise RuntimeError(f"the benchmark cell failed: {reply['content']}")
        text = "".join(msg["content"].get("text", "") for msg in printed if msg["msg_type"] == "stream")
        return json.loads(text.strip().splitlines()[-1])
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)


def main(rounds: int = 5) -> None:
    results = [one_round() for _ in range(rounds)]
    totals = [result["total"] for result in results]
    loads = [result["load_ext"] for result in results]
    heavy = sorted({name for result in results for name in result["heavy"]})
    median = statistics.median(totals)
    cpu = statistics.median(result["cpu"] for result in results)
    load = os.getloadavg()[0]
    print(f"%load_ext nbtoolkit: median {statistics.median(loads) * 1000:.0f} ms")
    print(
        f"%load_ext nbtoolkit + showing the form: median {median * 1000:.0f} ms, "
        f"min {min(totals) * 1000:.0f} ms, max {max(totals) * 1000:.0f} ms over {rounds} fresh kernels"
    )
    print(
        f"  CPU time of the kernel for the same: median {cpu * 1000:.0f} ms (less sensitive to a busy machine; "
        f"load average {load:.1f} on {os.cpu_count()} cores)"
    )
    print(f"ratio to the {TARGET_S * 1000:.0f} ms target: {median / TARGET_S:.2f} (wall), {cpu / TARGET_S:.2f} (CPU)")
    print(f"heavy modules imported: {', '.join(heavy) or 'none'}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
