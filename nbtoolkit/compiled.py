"""Compiled vs native in one call: the same run twice, then the comparison.

Both runs share the seed, the data order and fixed-length padding (compiled graphs recompile
on every new shape), and run one after the other so neither steals the other's cores.
On Neuron, "native" is the same run on CPU; elsewhere it is `compile: none` vs `compile: torch`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from nbtoolkit import runner as job_control
from nbtoolkit.api import Job, launch
from nbtoolkit.metrics.compare import Comparison, compare
from nbtoolkit.runner.store import JobStore
from nbtoolkit.spec import RunSpec, SpecError, load_spec, safe_name
from nbtoolkit.spec_parts.yaml_reading import merged


def compiled_variants(
    spec: RunSpec | dict | str | Path, compiled_changes: Mapping[str, Any] | None = None
) -> dict[str, RunSpec]:
    """The native spec, then the compiled one, by label, with fixed padding and the same seed.

    `compiled_changes` go into the compiled run only: what compiling lets it afford, such as the larger
    batch that fits once the compiler has shrunk the memory footprint (with the learning rate scaled to it).
    """
    spec = load_spec(spec)
    if spec.script is not None:
        raise SpecError(
            f"script {spec.script.path} decides for itself whether to compile, so both runs would be the "
            "same; compare_compiled needs a spec without script (nbtoolkit's training program)"
        )
    base = spec.model_dump()
    base["dataset"]["pad_to_max_length"] = True
    name = spec.display_name
    if spec.hardware.accelerator == "neuron":
        native = {
            "compile": "none",
            "hardware": {**base["hardware"], "accelerator": "cpu"},
            "parallelism": {
                **base["parallelism"],
                "strategy": "none" if base["parallelism"]["strategy"] == "xla" else base["parallelism"]["strategy"],
            },
            "launcher": "auto" if base["launcher"] == "neuron" else base["launcher"],
        }
        compiled = {"compile": "neuron"}
        labels = ("cpu", "neuron")
    else:
        native, compiled, labels = {"compile": "none"}, {"compile": "torch"}, ("eager", "torch.compile")
    compiled = merged(compiled, dict(compiled_changes or {}))
    return {
        label: load_spec(merged(base, {**changes, "name": safe_name(f"{name}-{label}")}))
        for label, changes in zip(labels, (native, compiled), strict=False)
    }


def compare_compiled(
    spec: RunSpec | dict | str | Path,
    *,
    compiled_changes: Mapping[str, Any] | None = None,
    timeout: float | None = None,
    on_launch: Callable[[Job], Any] | None = None,
    store: JobStore | None = None,
) -> Comparison:
    """Run `spec` native, then compiled (with `compiled_changes`, see compiled_variants), wait for both,
    and compare them (native is the baseline).

    `on_launch(job)` is called as each job starts, e.g. `nbtoolkit.notebook.charts.live_chart`
    to watch it; a chart it returns draws its final frame before the next run starts. The table's verdict says plainly when compiling did not pay off.
    """
    jobs: dict[str, Job] = {}
    for label, variant in compiled_variants(spec, compiled_changes).items():
        job = launch(variant, store=store)
        jobs[label] = job
        watcher = on_launch(job) if on_launch is not None else None
        record = job_control.wait(job.id, store=job.store, timeout=timeout)
        if record.active:
            raise TimeoutError(
                f"the {label} run (job {job.id}) is still {record.status} after {timeout}s; "
                "compare the jobs later with nbtoolkit.metrics.compare.compare"
            )
        if callable(getattr(watcher, "wait", None)):  # a live chart: its final frame, before the next run
            watcher.wait(timeout=30)
        if record.status != "succeeded":
            raise RuntimeError(
                f"the {label} run (job {job.id}) {record.status}: "
                f"{record.message or 'see job.logs()'}; nothing to compare"
            )
    return compare(jobs, baseline=0)
