"""The planner against a GPU: predicted vs measured peak device memory and samples/s, per model and precision.

    python benchmarks/gpu_truth.py [--out docs/gpu-truth-table.md]    # one GPU, under 8 minutes on an H100
    python benchmarks/gpu_truth.py --tiny --device cpu --variants fp32  # the same code on tiny models (the test)
    python benchmarks/gpu_truth.py --predict-from LOG --out ...   # a GPU run's printed rows, the planner's added here

Every model is built from a config written here (random weights: the same memory and speed as the
real ones), so it runs on a machine that reaches nothing. Each case trains a few steps the way the
Trainer does (AdamW, fp32 weights, bf16 under autocast, `torch.compile` on the whole model for the
compiled rows) on random tokens of fixed length, after warm-up steps that are not timed. Measured:
`torch.cuda.max_memory_allocated` (what the planner models: weights, gradients, optimizer states,
activations) and `max_memory_reserved` (what the allocator held), and samples/s. Predicted: the
planner's per-device bytes and samples/s for the same spec on one H100 of a p5.48xlarge. Cases that
would start after `--budget-s` are listed as skipped, so the script ends in time.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
GiB = 2**30
#: the planner's device for the predictions: one H100 80 GB of a p5.48xlarge
INSTANCE = "p5.48xlarge"
VARIANTS = ("fp32", "bf16", "bf16+compile")


@dataclass(frozen=True)
class Case:
    name: str
    task: str
    config: dict[str, Any]
    batch: int
    length: int
    target_length: int = 0
    adapter: bool = False
    #: the tiny stand-in's config changes (`--tiny`)
    tiny: dict[str, Any] = field(default_factory=dict)


BERT_TINY = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64}
T5_TINY = {"d_model": 32, "d_ff": 64, "d_kv": 16, "num_heads": 2, "num_layers": 2, "num_decoder_layers": 2}
CASES = [
    Case(
        "BERT-base classification",
        "text-classification",
        {"model_type": "bert", "hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12,
         "intermediate_size": 3072, "vocab_size": 30522, "max_position_embeddings": 512, "num_labels": 6},
        batch=32, length=128, tiny=BERT_TINY,
    ),
    Case(
        "BERT-large classification",
        "text-classification",
        {"model_type": "bert", "hidden_size": 1024, "num_hidden_layers": 24, "num_attention_heads": 16,
         "intermediate_size": 4096, "vocab_size": 30522, "max_position_embeddings": 512, "num_labels": 6},
        batch=32, length=128, tiny=BERT_TINY,
    ),
    Case(
        "T5-small summarization",
        "summarization",
        {"model_type": "t5", "d_model": 512, "d_ff": 2048, "d_kv": 64, "num_heads": 8, "num_layers": 6,
         "num_decoder_layers": 6, "vocab_size": 32128, "feed_forward_proj": "relu", "tie_word_embeddings": True,
         "decoder_start_token_id": 0, "pad_token_id": 0},
        batch=16, length=512, target_length=128, tiny=T5_TINY,
    ),
    Case(
        "T5-base summarization",
        "summarization",
        {"model_type": "t5", "d_model": 768, "d_ff": 3072, "d_kv": 64, "num_heads": 12, "num_layers": 12,
         "num_decoder_layers": 12, "vocab_size": 32128, "feed_forward_proj": "relu", "tie_word_embeddings": True,
         "decoder_start_token_id": 0, "pad_token_id": 0},
        batch=16, length=512, target_length=128, tiny=T5_TINY,
    ),
    Case(
        "GPT-2 causal LM",
        "causal-lm",
        {"model_type": "gpt2", "n_embd": 768, "n_layer": 12, "n_head": 12, "vocab_size": 50257, "n_positions": 1024},
        batch=8, length=1024, tiny={"n_embd": 32, "n_layer": 2, "n_head": 2},
    ),
    *(
        Case(
            f"Qwen2-0.5B-like chat, {'LoRA r=16' if adapter else 'full'}",
            "causal-lm",
            {"model_type": "qwen2", "hidden_size": 896, "intermediate_size": 4864, "num_hidden_layers": 24,
             "num_attention_heads": 14, "num_key_value_heads": 2, "vocab_size": 151936,
             "max_position_embeddings": 32768, "tie_word_embeddings": True, "rope_theta": 1000000.0},
            batch=4, length=1024, adapter=adapter,
            tiny={"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
                  "num_key_value_heads": 1, "vocab_size": 1000},
        )
        for adapter in (False, True)
    ),
]  # fmt: skip


@dataclass
class Row:
    case: str
    variant: str
    predicted_gib: float | None = None
    allocated_gib: float | None = None
    reserved_gib: float | None = None
    predicted_sps: float | None = None
    measured_sps: float | None = None
    note: str = ""


def sized(case: Case, tiny: bool) -> tuple[dict[str, Any], int, int, int]:
    """The case's config, batch and lengths (tiny: a few thousand parameters, short sequences)."""
    if not tiny:
        return case.config, case.batch, case.length, case.target_length
    config = {**case.config, **case.tiny}
    config["vocab_size"] = min(config.get("vocab_size", 1000), 1000)
    return config, 2, 16, 8 if case.target_length else 0


def predicted(case: Case, variant: str, folder: Path, config: dict, batch: int, length: int, target: int) -> Any:
    """The planner's estimate of the case on one H100 (the config saved as a local model for it to size)."""
    from nbtoolkit.planner import plan

    model_dir = folder / case.name.replace(" ", "_").replace(",", "").replace("=", "")
    model_dir.mkdir(parents=True, exist_ok=True)
    (model_dir / "config.json").write_text(json.dumps(config))
    spec = {
        "task": case.task,
        "model": str(model_dir),
        "precision": "bf16" if variant.startswith("bf16") else "fp32",
        "compile": "torch" if variant.endswith("compile") else "none",
        "hardware": {"accelerator": "cuda", "instance_type": INSTANCE, "devices": 1},
        "train": {"batch_size": batch, "max_steps": 100},
        "dataset": {"max_length": length, "max_target_length": max(target, 1)},
    }
    if case.adapter:
        spec["adapter"] = {"type": "lora", "r": 16, "target_modules": ["q_proj", "k_proj", "v_proj", "o_proj"]}
    return plan(spec, alternatives=False)


def build(case: Case, config: dict[str, Any], device: str):
    """The model from its config alone, as the training program builds it for the task (random weights)."""
    import transformers

    settings = dict(config)
    kind = settings.pop("model_type")
    model_config = transformers.AutoConfig.for_model(kind, **settings)
    auto = {
        "text-classification": transformers.AutoModelForSequenceClassification,
        "summarization": transformers.AutoModelForSeq2SeqLM,
        "causal-lm": transformers.AutoModelForCausalLM,
    }[case.task]
    model = auto.from_config(model_config)
    if case.adapter:
        from peft import LoraConfig, get_peft_model

        lora = LoraConfig(r=16, lora_alpha=32, target_modules=["q_proj", "k_proj", "v_proj", "o_proj"])
        model = get_peft_model(model, lora)
    return model.to(device)


def batch_of(case: Case, config: dict[str, Any], batch: int, length: int, target: int, device: str) -> dict:
    import torch

    vocab = config["vocab_size"]
    ids = torch.randint(1, vocab, (batch, length), device=device)
    inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    if case.task == "text-classification":
        inputs["labels"] = torch.randint(0, config.get("num_labels", 2), (batch,), device=device)
    elif case.task == "summarization":
        inputs["labels"] = torch.randint(1, vocab, (batch, target), device=device)
    else:
        inputs["labels"] = ids
    return inputs


def measure(case: Case, variant: str, config: dict, batch: int, length: int, target: int, args) -> dict[str, float]:
    """Train `args.steps` timed steps after `args.warmup`; peak memory over all of them."""
    import torch

    device = args.device
    cuda = device.startswith("cuda")
    if cuda:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    torch.manual_seed(0)
    model = build(case, config, device)
    model.train()
    trained = [parameter for parameter in model.parameters() if parameter.requires_grad]
    optimizer = torch.optim.AdamW(trained, lr=1e-5, fused=cuda)
    forward = torch.compile(model) if variant.endswith("compile") else model
    inputs = batch_of(case, config, batch, length, target, device)
    dtype = torch.bfloat16 if variant.startswith("bf16") else None

    def step() -> None:
        with torch.autocast(device_type=device.split(":")[0], dtype=dtype, enabled=dtype is not None):
            loss = forward(**inputs).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    for _ in range(args.warmup):
        step()
    if cuda:
        torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(args.steps):
        step()
    if cuda:
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    figures = {"measured_sps": batch * args.steps / seconds}
    if cuda:
        figures["allocated_gib"] = torch.cuda.max_memory_allocated() / GiB
        figures["reserved_gib"] = torch.cuda.max_memory_reserved() / GiB
    return figures


def run_case(case: Case, variant: str, folder: Path, args) -> Row:
    config, batch, length, target = sized(case, args.tiny)
    row = Row(case.name, variant)
    try:
        estimate = predicted(case, variant, folder, config, batch, length, target)
        row.predicted_gib = estimate.per_device_bytes / GiB
        row.predicted_sps = estimate.samples_per_second
    except Exception as exc:  # the planner could not size it: say so in the row, measure anyway
        row.note = f"no prediction: {exc}"[:120]
    try:
        for key, value in measure(case, variant, config, batch, length, target, args).items():
            setattr(row, key, value)
    except Exception as exc:  # out of memory, a compile failure: the row says which
        row.note = (row.note + "; " if row.note else "") + f"{type(exc).__name__}: {exc}"[:160]
    return row


def number(value: float | None, digits: int = 2) -> str:
    return "" if value is None else f"{value:,.{digits}f}"


def ratio(measured: float | None, predicted: float | None) -> str:
    return f"{measured / predicted:.2f}" if measured and predicted else ""


#: the first line of every table this script writes: `--out` overwrites only such a file, never a page's prose
MARK = "<!-- written by benchmarks/gpu_truth.py; docs/gpu-truth.md links it -->"


def measured_line(device: str, seconds: float, argv: list[str], tiny: bool) -> str:
    """Date, device, the command, and whether the models were tiny."""
    command = " ".join(["python benchmarks/gpu_truth.py", *argv])
    sizes = "tiny stand-ins of the models, not their real sizes (a check that the script runs)" if tiny else "full size"
    return (
        f"Measured {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC on {device} in {seconds:.0f} s "
        f"(`{command}`), models {sizes}. Predicted: nbtoolkit's planner for one H100 of a {INSTANCE}."
    )


def table(rows: list[Row], measured: str) -> str:
    """The Markdown table for docs/gpu-truth-table.md, under the line that says what was measured where."""
    head = [
        MARK,
        measured,
        "",
        (
            "| case | variant | predicted GiB | allocated GiB | reserved GiB | allocated / predicted "
            "| predicted samples/s | measured samples/s | measured / predicted | note |"
        ),
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    lines = [
        f"| {row.case} | {row.variant} | {number(row.predicted_gib)} | {number(row.allocated_gib)} "
        f"| {number(row.reserved_gib)} | {ratio(row.allocated_gib, row.predicted_gib)} "
        f"| {number(row.predicted_sps, 1)} | {number(row.measured_sps, 1)} "
        f"| {ratio(row.measured_sps, row.predicted_sps)} | {row.note.replace('|', '/')} |"
        for row in rows
    ]
    return "\n".join(head + lines) + "\n"


def device_name(device: str) -> str:
    import torch

    if device.startswith("cuda"):
        return f"{torch.cuda.get_device_name(device)} (torch {torch.__version__})"
    return f"CPU (torch {torch.__version__})"


def predicted_here(log: Path, argv: list[str]) -> str:
    """The table of a GPU run's printed rows (one JSON line each, its table's "Measured" line) with the planner's
    predictions made here: the planner needs no GPU, and the GPU machine may lack nbtoolkit's own dependencies."""
    lines = log.read_text().splitlines()
    rows = [Row(**json.loads(line)) for line in lines if line.startswith('{"case"')]
    measured = next(line for line in lines if line.startswith("Measured "))
    with tempfile.TemporaryDirectory(prefix="gpu-truth-") as folder:
        for row in rows:
            case = next(case for case in CASES if case.name == row.case)
            estimate = predicted(case, row.variant, Path(folder), *sized(case, tiny=False))
            row.predicted_gib = estimate.per_device_bytes / GiB
            row.predicted_sps = estimate.samples_per_second
            row.note = "" if row.note.startswith("no prediction") else row.note
    command = " ".join(["python benchmarks/gpu_truth.py", *argv])
    return table(rows, f"{measured} Predictions added on a machine without the GPU (`{command}`).")


def refuse(sentence: str) -> int:
    print(f"gpu_truth: {sentence}", file=sys.stderr)
    return 2


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda", help="cuda (default) or cpu")
    parser.add_argument("--tiny", action="store_true", help="tiny stand-ins of every model (a check that it runs)")
    parser.add_argument("--variants", default=",".join(VARIANTS), help=f"comma-separated, of {', '.join(VARIANTS)}")
    parser.add_argument("--cases", default="", help="comma-separated parts of case names to run (default: all)")
    parser.add_argument("--steps", type=int, default=10, help="timed steps per case")
    parser.add_argument("--warmup", type=int, default=3, help="steps before timing (compiling, allocator warm-up)")
    parser.add_argument("--budget-s", type=float, default=420.0, help="start no case after this many seconds")
    parser.add_argument(
        "--predict-from",
        type=Path,
        default=None,
        help="the output of a GPU run: its measured rows, with the planner's predictions made here",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="write the table here too (docs/gpu-truth-table.md, which the page links)",
    )
    argv = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(argv)
    wanted = [part.strip() for part in args.cases.split(",") if part.strip()]
    cases = [case for case in CASES if not wanted or any(part in case.name for part in wanted)]
    if not cases:
        return refuse(f"--cases {args.cases} matches no case; the cases are {'; '.join(case.name for case in CASES)}")
    if args.out and args.out.exists() and not args.out.read_text().startswith(MARK):
        return refuse(f"--out {args.out} was not written by gpu_truth.py; give a new file or docs/gpu-truth-table.md")
    if importlib.util.find_spec("nbtoolkit") is None:  # a GPU machine without nbtoolkit installed: this checkout's
        sys.path.insert(0, str(ROOT))
    if args.predict_from:
        text = predicted_here(args.predict_from, argv)
        print(text)
        if args.out:
            args.out.write_text(text)
        return 0
    variants = [variant.strip() for variant in args.variants.split(",") if variant.strip()]
    unknown = [variant for variant in variants if variant not in VARIANTS]
    if unknown:
        parser.error(f"--variants: {', '.join(unknown)} unknown; use some of {', '.join(VARIANTS)}")
    if args.device.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            return refuse("no CUDA device here; run with --device cpu (and --tiny) to check the script")
    start = time.monotonic()
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="gpu-truth-") as folder:
        for case in cases:
            for variant in variants:
                if time.monotonic() - start > args.budget_s:
                    rows.append(Row(case.name, variant, note=f"skipped: past the {args.budget_s:.0f} s budget"))
                    continue
                rows.append(run_case(case, variant, Path(folder), args))
                print(json.dumps(rows[-1].__dict__), flush=True)
    text = table(rows, measured_line(device_name(args.device), time.monotonic() - start, argv, args.tiny))
    print(text)
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
