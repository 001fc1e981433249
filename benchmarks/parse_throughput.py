"""Parse throughput: nbtoolkit's LogParser against the tutorial's `%%capture` + `literal_eval` approach.

Both read the same large synthetic Trainer log (tqdm bars, transformers-5 string dicts, evals,
warnings). Two figures: the whole log at once (lines/s, ratio), and following it live with a
refresh every so often: the parser takes only the new text, while the tutorial's cell re-reads
the whole capture each time. Also prints what each one got out of the log.

    .venv/bin/python benchmarks/parse_throughput.py [--steps 200000] [--repeat 3] [--refreshes 50]
"""

from __future__ import annotations

import argparse
import random
import time
from ast import literal_eval

from nbtoolkit.metrics.parse import LogParser

CHUNK = 64 * 1024  # the supervisor reads the log in pieces like these


def synthetic_log(steps: int, logging_steps: int = 10, eval_steps: int = 1000, seed: int = 0) -> str:
    """What `python run_clm.py` prints under transformers 5: a tqdm bar per step, dict lines, evals."""
    rng = random.Random(seed)
    lines = [
        "[WARNING] Using the `WANDB_DISABLED` environment variable is deprecated.",
        f"***** Running training *****\n  Num examples = {steps * 8}\n  Total optimization steps = {steps}",
    ]
    bar, loss = [], 4.0
    for step in range(1, steps + 1):
        bar.append(
            f"\r {100 * step // steps:3d}%|##        | {step}/{steps} [00:{step % 60:02d}<01:00, "
            f"{rng.uniform(3, 4):.2f}it/s]"
        )
        if step % logging_steps == 0:
            loss *= 0.9995
            lines.append(
                "".join(bar) + f"{{'loss': '{loss:.4g}', 'grad_norm': '{rng.uniform(0.5, 2):.4g}', "
                f"'learning_rate': '{5e-5 * (1 - step / steps):.4g}', 'epoch': '{step / steps:.4g}'}}"
            )
            bar = []
        if step % eval_steps == 0:
            lines.append(
                f"{{'eval_loss': '{loss * 1.1:.4g}', 'eval_runtime': '3.2', "
                f"'eval_samples_per_second': '312.5', 'eval_steps_per_second': '39.06', "
                f"'epoch': '{step / steps:.4g}'}}"
            )
    lines.append("".join(bar))
    lines.append(
        f"{{'train_runtime': '{steps / 3.5:.4g}', 'train_samples_per_second': '28', "
        f"'train_steps_per_second': '3.5', 'train_loss': '{loss:.4g}', 'epoch': '1'}}"
    )
    return "\n".join(lines) + "\n"


def with_log_parser(text: str) -> list[dict]:
    parser = LogParser()
    records = []
    for start in range(0, len(text), CHUNK):
        records += parser.feed(text[start : start + CHUNK])
    return records + parser.flush()


# -- the tutorial's helpers (seed 004), as written there -------------------------------------------------------


def _summarize(captured_stdout: str) -> list[str]:
    final = []
    for line in captured_stdout.split("\n"):
        cleaned = line.strip()
        if "{" in cleaned and "}" in cleaned:
            final.append(cleaned[cleaned.index("{") : cleaned.index("}") + 1])
    return final


def make_sense(string: str):
    try:
        return literal_eval(string)
    except Exception:
        return None


def summarize(summary: list[str]) -> dict:
    final = {"train": [], "eval": [], "summary": {}}
    for line in summary:
        interpretation = make_sense(line.replace("nan", "'nan'"))
        if interpretation:
            if "loss" in interpretation:
                final["train"].append(interpretation)
            elif "eval_loss" in interpretation:
                final["eval"].append(interpretation)
            elif "train_runtime" in interpretation:
                final["summary"] = interpretation
    return final


def with_literal_eval(text: str) -> dict:
    return summarize(_summarize(text))


def following(text: str, refreshes: int) -> tuple[float, float]:
    """Seconds to keep up with a log that arrives in `refreshes` pieces: (LogParser, literal_eval)."""
    ends = [len(text) * (index + 1) // refreshes for index in range(refreshes)]
    parser, started, previous = LogParser(), time.perf_counter(), 0
    for end in ends:
        parser.feed(text[previous:end])
        previous = end
    ours = time.perf_counter() - started
    started = time.perf_counter()
    for end in ends:
        with_literal_eval(text[:end])
    return ours, time.perf_counter() - started


def best_of(repeat: int, function, text: str) -> tuple[float, object]:
    times, result = [], None
    for _ in range(repeat):
        started = time.perf_counter()
        result = function(text)
        times.append(time.perf_counter() - started)
    return min(times), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--refreshes", type=int, default=50, help="chart refreshes while following the log")
    args = parser.parse_args()
    text = synthetic_log(args.steps)
    lines = text.count("\n") + text.count("\r")
    print(f"log: {len(text) / 1e6:.1f} MB, {lines:,} lines and progress updates, {args.steps:,} steps")
    ours_s, records = best_of(args.repeat, with_log_parser, text)
    theirs_s, summary = best_of(args.repeat, with_literal_eval, text)
    kinds = [record["kind"] for record in records]
    print(
        f"LogParser:            {ours_s:6.2f} s  {lines / ours_s / 1e6:5.2f} M lines/s  "
        f"{kinds.count('train')} train, {kinds.count('eval')} eval, {kinds.count('summary')} summary records "
        f"(floats, with step {records[-2]['step']}/{records[-2]['max_steps']} and steps/s)"
    )
    print(
        f"literal_eval (seed):  {theirs_s:6.2f} s  {lines / theirs_s / 1e6:5.2f} M lines/s  "
        f"{len(summary['train'])} train, {len(summary['eval'])} eval, {int(bool(summary['summary']))} summary dicts "
        f"(values as {type(summary['train'][0]['loss']).__name__}s, no step)"
    )
    print(f"whole log: LogParser has {theirs_s / ours_s:.2f}x the throughput of literal_eval")
    ours_s, theirs_s = following(text, args.refreshes)
    print(
        f"following it with {args.refreshes} refreshes: LogParser {ours_s:.2f} s, literal_eval re-reading the "
        f"capture {theirs_s:.2f} s: {theirs_s / ours_s:.1f}x"
    )


if __name__ == "__main__":
    main()
