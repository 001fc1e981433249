"""The "what fits where" table: FLAN-T5 XL/XXL on four AWS instances, as the FLAN-T5 DeepSpeed tutorial ran them.

`python -m nbtoolkit.planner.report [--out docs/what-fits-where.md]` plans every row from a spec
(DeepSpeed ZeRO-3, gradient checkpointing, 512 source / 128 target tokens, 3 epochs of
CNN/DailyMail) and writes the markdown committed in docs/, explanation included.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from nbtoolkit.hardware import catalog
from nbtoolkit.planner.estimates import GiB, Plan
from nbtoolkit.planner.explain import assumptions
from nbtoolkit.planner.plan import plan
from nbtoolkit.planner.timing import DEFAULT_UTILISATION

MODELS = ("google/flan-t5-xl", "google/flan-t5-xxl")
INSTANCES = ("p3.8xlarge", "p3.16xlarge", "g5.24xlarge", "p4d.24xlarge")
PRECISIONS = ("fp32", "bf16")
OFFLOADS = {"none": ("none", "none"), "optimizer": ("cpu", "none"), "optimizer + weights": ("cpu", "cpu")}
SOURCE_TOKENS, TARGET_TOKENS = 512, 128
EPOCHS = 3
#: the tutorial: "The training using the CNN Dailymail Dataset takes roughly 10 hours and costs ~$322"
TUTORIAL_HOURS, TUTORIAL_COST = 10, 322


T = TypeVar("T")


def known(value: T | None) -> T:
    """A figure the plan leaves None when the catalog lacks the instance's memory or price: the reports' instances
    are all in the catalog, so None here is a catalog gap to fix, not a row to print."""
    if value is None:
        raise ValueError("the catalog lacks the memory or the price of an instance this report names")
    return value


def row_spec(model: str, instance: str, precision: str, offload: str, batch_size: int = 1) -> dict:
    """The spec of one table row (the tutorial's script: ZeRO-3, gradient checkpointing, padded inputs)."""
    offload_optimizer, offload_params = OFFLOADS[offload]
    return {
        "task": "summarization",
        "model": model,
        "dataset": {
            "name": "cnn_dailymail",
            "config": "3.0.0",
            "text_column": "article",
            "summary_column": "highlights",
            "max_length": SOURCE_TOKENS,
            "max_target_length": TARGET_TOKENS,
            "pad_to_max_length": True,
        },
        "hardware": {"target": "local", "accelerator": "cuda", "instance_type": instance},
        "parallelism": {
            "strategy": "deepspeed",
            "zero_stage": 3,
            "offload_optimizer": offload_optimizer,
            "offload_params": offload_params,
        },
        "precision": precision,
        "train": {"epochs": EPOCHS, "batch_size": batch_size, "gradient_checkpointing": True},
    }


def row_plan(model: str, instance: str, precision: str, offload: str) -> tuple[Plan, Plan | None]:
    """The row at batch 1 (memory, largest batch), and at its largest batch (time, cost) if any fits."""
    first = plan(row_spec(model, instance, precision, offload), alternatives=False)
    if first.problems or not first.fits:
        return first, None
    return first, plan(row_spec(model, instance, precision, offload, known(first.max_batch_size)), alternatives=False)


def _row(model: str, instance: str, precision: str, offload: str) -> list[str]:
    first, best = row_plan(model, instance, precision, offload)
    gpus = f"{first.devices_per_node} x {first.accelerator}"
    name = model.split("/")[-1]
    host = f"{first.host_bytes / GiB:,.0f} / {known(first.host_memory_bytes) / GiB:,.0f}"
    if first.problems:
        return [name, instance, gpus, precision, offload, "-", "no bf16", "-", "-", "-"]
    if best is None:
        why = "host OOM" if first.host_fits is False else "OOM"
        return [name, instance, gpus, precision, offload, f"{first.per_device_bytes / GiB:.1f}", why, host, "-", "-"]
    return [
        name,
        instance,
        gpus,
        precision,
        offload,
        f"{first.per_device_bytes / GiB:.1f}",
        str(best.batch_size),
        host,
        f"{best.hours:,.1f}",
        f"${best.cost_usd:,.0f}",
    ]


COLUMNS = (
    "model",
    "instance",
    "GPUs",
    "precision",
    "offload",
    "GiB/GPU at batch 1",
    "largest batch/GPU",
    "host GiB (need / have)",
    "hours",
    "cost",
)


def table() -> list[list[str]]:
    """One row per model, instance, precision and offload, in COLUMNS order."""
    return [
        _row(model, instance, precision, offload)
        for model in MODELS
        for instance in INSTANCES
        for precision in PRECISIONS
        for offload in OFFLOADS
    ]


def _markdown(rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def tutorial_comparison() -> tuple[Plan, float]:
    """The tutorial's run (XXL, bf16, ZeRO-3, batch 8, p4d) as planned, and the utilisation its 10 h implies."""
    tutorial = plan(row_spec("google/flan-t5-xxl", "p4d.24xlarge", "bf16", "none", batch_size=8), alternatives=False)
    return tutorial, DEFAULT_UTILISATION * known(tutorial.hours) / TUTORIAL_HOURS


def document() -> str:
    rows = table()
    tutorial, implied = tutorial_comparison()
    memory = tutorial.memory
    offloaded, _ = row_plan("google/flan-t5-xxl", "p3.8xlarge", "fp32", "optimizer + weights")
    measured = plan(
        row_spec("google/flan-t5-xxl", "p4d.24xlarge", "bf16", "none", batch_size=8),
        measured=287_113 * EPOCHS / (TUTORIAL_HOURS * 3600),
        alternatives=False,
    )
    difference = "shorter" if known(tutorial.hours) < TUTORIAL_HOURS else "longer"
    unchecked_spec = row_spec("google/flan-t5-xxl", "p4d.24xlarge", "bf16", "none", batch_size=8)
    unchecked_spec["train"]["gradient_checkpointing"] = False
    unchecked = plan(unchecked_spec, alternatives=False)
    return f"""# What fits where: FLAN-T5 XL and XXL with DeepSpeed ZeRO-3

Generated by `python -m nbtoolkit.planner.report --out docs/what-fits-where.md` from the planner
(`nbtoolkit/planner/`) and the catalog (`nbtoolkit/hardware/catalog.yaml`); every number below is a
prediction, none a measurement.

**The run** (the tutorial "Fine-tune FLAN-T5 XL/XXL using DeepSpeed & Hugging Face Transformers"):
summarization of CNN/DailyMail 3.0.0, {EPOCHS} epochs of 287,113 training examples, inputs
padded to {SOURCE_TOKENS} tokens and targets to {TARGET_TOKENS} (the tutorial pads to the longest input, at
most 512 with its prompt, and to the 95th percentile of summary lengths, which it does not print;
its `generation_max_length` of 129 suggests about 128), DeepSpeed ZeRO-3, AdamW, gradient
checkpointing on (its `run_seq2seq_deepspeed.py` defaults to it). FLAN-T5 XL has
2,849,757,184 parameters and XXL 11,135,332,352 (counted from their configs; the largest
layer is the 32128-word embedding).

Each row is the spec `nbtoolkit.planner.report.row_spec(model, instance, precision, offload)`:
"GiB/GPU at batch 1" is the predicted peak per GPU at one example per GPU, "largest
batch/GPU" the largest per-GPU batch that fits, and hours and cost are for the whole run at
that batch on one instance, at on-demand EC2 prices ({catalog.prices_note()}).
"OOM": not even one example fits; "host OOM": the offloaded states need more host memory than
the instance has; "no bf16": V100s have no bfloat16 (and T5 overflows in fp16).

{_markdown(rows)}

## Compared with the tutorial's run

The tutorial ran FLAN-T5 XXL with bf16, ZeRO-3, no offload and 8 examples per GPU on 8 x A100 40GB
(it names a "p4dn.24xlarge": the instance is p4d.24xlarge) and reports that training "takes
roughly {TUTORIAL_HOURS} hours and costs ~${TUTORIAL_COST}". The planner predicts, for that setup:

- memory per GPU {tutorial.per_device_bytes / GiB:.1f} GiB of {known(tutorial.device_memory_bytes) / GiB:.0f} GiB ({memory.in_gib()}):
  it fits, as it did for the tutorial;
- {tutorial.hours:.1f} hours and ${tutorial.cost_usd:,.0f}, against the tutorial's ~{TUTORIAL_HOURS} hours and ~${TUTORIAL_COST}.

The prediction is {abs(1 - known(tutorial.hours) / TUTORIAL_HOURS):.0%} {difference} than the tutorial's run: the tutorial's time
implies about {implied:.0%} of the A100's bf16 peak where the planner assumes {DEFAULT_UTILISATION:.0%}
(counting the recomputed forward as work). A measured pace replaces the assumption
(`plan(spec, measured=samples_per_second)`, or `nbtoolkit plan SPEC --measured N`): with the
tutorial's pace, 287,113 x 3 / 36,000 s = {measured.samples_per_second:.1f} samples/s, the plan gives
{measured.hours:.1f} hours and ${measured.cost_usd:,.0f} (that pace is {measured.utilisation:.0%} of peak), and
alternatives on A100s are re-timed at that utilisation. The tutorial's price ($322 for about 10 h, $32.2/h) matches
the p4d.24xlarge list price in the catalog ($32.77/h). The tutorial's own table of measured memory,
batch sizes and times per configuration is not available to this project, so no other row is
compared with a measurement.

## How the numbers are made

{chr(10).join(f"- {line}" for line in _formula_lines())}

Assumptions:

{chr(10).join(f"- {line}" for line in assumptions())}

Reading the table:

- ZeRO-3 partitions weights, gradients and optimizer states over all GPUs of the instance, so
  8 GPUs hold the same model in half the memory per GPU of 4; offloading the optimizer to the
  CPU removes the 16 bytes per parameter of fp32 master weights, gradients and Adam moments from
  the GPUs, and offloading the weights leaves only the largest layer, gathered whole, on them.
- Offload trades GPU memory for host memory (x1.5 buffer, per instance) and time: the
  gradients and weights cross PCIe every step and the CPU runs Adam, which the table's hours
  include. fp32 XXL with everything offloaded needs {offloaded.host_bytes / GiB:.0f} GiB of host memory: more
  than a p3.8xlarge's {known(offloaded.host_memory_bytes) / GiB:.0f} GiB.
- The largest batches are large because gradient checkpointing keeps only each layer's input
  (plus one layer being recomputed); without it, XXL's activations per example grow
  {unchecked.memory.activations / tutorial.memory.activations:.0f}-fold. The tutorial used it: its training script
  (`scripts/run_seq2seq_deepspeed.py` in the tutorial's repository at the time) defaults
  `--gradient_checkpointing` to true and `--bf16` to true on A100s, and the tutorial's command passes
  neither; without checkpointing the same run would need
  {unchecked.per_device_bytes / GiB:.1f} GiB per GPU (`train.gradient_checkpointing: false` in a spec shows it).
- fp32 is timed at the GPUs' plain fp32 peak (PyTorch leaves TF32 off by default), which is why
  fp32 on A100s is far slower than bf16 on the same GPUs.
- The A10G's peak is the A10 datasheet's (AWS publishes none); g5 GPUs talk over PCIe, so
  ZeRO-3's gathers are slower there than over the p3/p4d NVLink.

No GPU was available when this table was produced, so no predicted peak memory here has been
checked against a measured one on a GPU. The activation term was checked on CPU instead:
`benchmarks/activation_memory.py` counts the bytes autograd keeps for backward in HF's T5 (eager
attention, bf16, dropout keeping CUDA's 1-byte masks) for 18 shapes, batch sizes and lengths; the
formula comes within 3-8% of them (it leaves out a few small tensors: embedding dropout masks,
the relative-position buckets, the LM head's input).
"""


def _formula_lines() -> list[str]:
    return [
        (
            "Model states per GPU follow DeepSpeed 0.19.8's own ZeRO-3 estimator "
            "(`estimate_zero3_model_states_mem_needs`): 4L + 18Ψ/N with 16-bit weights, 4L + 2Ψ/N with the optimizer "
            "offloaded, 4L with weights offloaded too (Ψ parameters, L the largest layer's, N GPUs); fp32 weights double "
            "the 16-bit terms. Host memory: 16Ψ (optimizer) or 18Ψ (and weights) per instance, x1.5."
        ),
        (
            "Activations per example follow Korthikanti et al. 2022 (11sh + 5as² per attention block, 19sh per 4h FFN, "
            "2 bytes per value in bf16, 4 in fp32), written per block for T5 as HF's T5 runs: RMSNorm keeping an fp32 "
            "copy, gated tanh-GELU FFN (5 ffn-wide tensors and a dropout mask), decoder self- and cross-attention, the "
            "stored attention scores of eager attention; with gradient checkpointing only each layer's input is kept "
            "plus one layer being recomputed; plus the logits (T5's loss does not upcast them)."
        ),
        "Per GPU = (model states + batch x activations) x 1.10 + 1 GiB (fragmentation, CUDA context).",
        (
            "FLOPs per example = 8 x (weights each source token passes through x 512 + weights each target token "
            "passes through x 128): 6 for forward and backward, 2 more for the recomputed forward."
        ),
        (
            f"Step time = FLOPs / (GPUs x peak x {DEFAULT_UTILISATION:.0%}), overlapped with ZeRO-3's gathers and "
            "reduce-scatter (3 x weights per micro-batch at half the NVLink/PCIe datasheet bandwidth), plus, when "
            "offloading, PCIe copies and CPU Adam (1e9 parameters/s per instance)."
        ),
    ]


def generate(argv: list[str] | None, prog: str, description: str, document: Callable[[], str]) -> int:
    """The command of a generated doc: write `document()` to --out, or print it."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--out", type=Path, help="write the markdown here (default: print it)")
    args = parser.parse_args(argv)
    text = document()
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
        print(f"wrote {args.out}")
    else:
        sys.stdout.write(text)
    return 0


def main(argv: list[str] | None = None) -> int:
    return generate(argv, "python -m nbtoolkit.planner.report", __doc__, document)


if __name__ == "__main__":
    sys.exit(main())
