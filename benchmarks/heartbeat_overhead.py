"""What the run doctor costs a training loop: the same tiny Trainer run with and without HeartbeatCallback (each
step notes the step for the heartbeat thread and stats the checkpoint-request file), in ABBA order (plain,
beating, beating, plain, ...) in one warm process, so machine load drifts evenly over both.

A tiny BERT (2 layers, 64 wide) on random tokens takes a few milliseconds a step on CPU: the worst case for
a per-step cost (a real model's steps are 100-10,000x longer). Each run's speed is its steps per CPU second
of the whole process (every thread: the heartbeat thread's writes count) after `--warmup` steps: on a
machine others share, wall-clock speed swings 2x from run to run with their load, CPU time far less.
Wall-clock steps/s are printed too. Printed: every pair's two speeds and their ratio (beating/plain), then
the median ratio (goal >= 0.99), and the CPU one step's callback takes, timed alone over 100,000 calls.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/heartbeat_overhead.py [--pairs 6] [--steps 600]
    PYTHONPATH=$PWD .venv/bin/python benchmarks/heartbeat_overhead.py --block 100 --pairs 30   # interleaved

`--block N`: one run, heartbeats on in every other block of N steps (ABBA by pair): on this VM whole runs swing
2x in speed on an idle host, which hides a 1% effect; adjacent blocks of the same run share the machine's state.
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import tempfile
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")


def make_trainer(steps: int, output_dir: str, callbacks: list):
    import torch
    from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments

    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=512, hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128
    )
    model = BertForSequenceClassification(config)
    rows = [{"input_ids": torch.randint(0, 512, (32,)), "labels": torch.tensor(i % 2)} for i in range(256)]
    args = TrainingArguments(
        output_dir=output_dir,
        max_steps=steps,
        per_device_train_batch_size=8,
        learning_rate=1e-3,
        logging_steps=10**9,
        save_strategy="no",
        report_to="none",
        use_cpu=True,
        disable_tqdm=True,
    )
    return Trainer(model=model, args=args, train_dataset=rows, callbacks=callbacks)


class StepClock:
    """Times the steps after the warm-up (as a callback, so both runs carry the same one)."""

    def __init__(self, warmup: int) -> None:
        self.warmup, self.start, self.end, self.steps = warmup, 0.0, 0.0, 0
        self.cpu_start = self.cpu_end = 0.0

    def callback(self):
        from transformers import TrainerCallback

        clock = self

        class Clock(TrainerCallback):
            def on_step_end(self, args, state, control, **kwargs):
                if state.global_step == clock.warmup:
                    clock.start, clock.cpu_start = time.perf_counter(), time.process_time()
                clock.end, clock.cpu_end = time.perf_counter(), time.process_time()
                clock.steps = state.global_step - clock.warmup

        return Clock()


def run(steps: int, warmup: int, beating: bool) -> tuple[float, float]:
    """(steps per CPU second, steps per wall second) after the warm-up."""
    from nbtoolkit.train.callbacks import HeartbeatCallback

    with tempfile.TemporaryDirectory() as job_dir:
        clock = StepClock(warmup)
        callbacks = [clock.callback(), *([HeartbeatCallback(job_dir)] if beating else [])]
        make_trainer(steps, job_dir, callbacks).train()
        if beating:
            time.sleep(0.6)  # the heartbeat thread's last write (and proof it wrote)
            assert os.listdir(os.path.join(job_dir, "ranks")), "no heartbeat written"
        return clock.steps / (clock.cpu_end - clock.cpu_start), clock.steps / (clock.end - clock.start)


def interleaved(pairs: int, block: int, warmup: int) -> list[tuple[float, float]]:
    """One Trainer whose heartbeat is on in every other block of `block` steps, ABBA by pair (off on, on off, ...):
    per pair, (plain, beating) steps per CPU second. Blocks a second long sit next to each other in one process,
    so the machine's drift (this VM's speed swings 2x between whole runs on an idle host) falls on both alike."""
    from transformers import TrainerCallback

    from nbtoolkit.train.callbacks import HeartbeatCallback

    def beating(block_index: int) -> bool:
        pair, position = divmod(block_index, 2)
        return position == (1 if pair % 2 == 0 else 0)

    clocks: list[float] = []  # CPU time at each block's start, then at the end

    with tempfile.TemporaryDirectory() as job_dir:
        heartbeat = HeartbeatCallback(job_dir)

        class Blocks(TrainerCallback):
            def on_step_end(self, args, state, control, **kwargs):
                done = state.global_step - warmup  # steps of the measured blocks finished
                if done >= 0 and done % block == 0:
                    clocks.append(time.process_time())
                if done >= 0 and done < 2 * pairs * block and beating(done // block):
                    heartbeat.on_step_end(args, state, control, **kwargs)

        make_trainer(warmup + 2 * pairs * block, job_dir, [Blocks()]).train()
    speeds = [block / (end - start) for start, end in itertools.pairwise(clocks)]
    return [
        (speeds[2 * pair + (0 if beating(2 * pair + 1) else 1)], speeds[2 * pair + (1 if beating(2 * pair + 1) else 0)])
        for pair in range(pairs)
    ]


def callback_cost(calls: int = 100_000) -> float:
    """Seconds of CPU one HeartbeatCallback.on_step_end takes (a step's whole added work, the thread's aside)."""
    from types import SimpleNamespace

    from nbtoolkit.train.callbacks import HeartbeatCallback

    with tempfile.TemporaryDirectory() as job_dir:
        callback = HeartbeatCallback(job_dir)
        state, control = SimpleNamespace(global_step=0), SimpleNamespace(should_save=False)
        start = time.process_time()
        for step in range(calls):
            state.global_step = step
            callback.on_step_end(None, state, control)
        return (time.process_time() - start) / calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=6)
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument(
        "--block", type=int, default=0, help="steps per block: heartbeats on and off in alternate blocks of one run"
    )
    options = parser.parse_args()
    import transformers

    transformers.logging.set_verbosity_error()
    if options.block:
        pairs = interleaved(options.pairs, options.block, options.warmup)
        for number, (plain, beating) in enumerate(pairs, start=1):
            print(
                f"pair {number}: plain {plain:.1f}, heartbeats {beating:.1f} steps per CPU s, ratio {beating / plain:.3f}"
            )
        ratios = [beating / plain for plain, beating in pairs]
        print(
            f"median ratio heartbeats/plain over {len(ratios)} interleaved pairs of {options.block}-step blocks: "
            f"{statistics.median(ratios):.3f} (range {min(ratios):.3f}-{max(ratios):.3f}; goal >= 0.99)"
        )
        return
    run(options.warmup + 20, options.warmup, beating=False)  # warm the process: imports, allocator
    ratios, wall_ratios, plain_speeds = [], [], []
    for pair in range(options.pairs):
        order = (False, True) if pair % 2 == 0 else (True, False)  # ABBA
        speeds = {beating: run(options.steps, options.warmup, beating) for beating in order}
        ratio, wall_ratio = (speeds[True][index] / speeds[False][index] for index in (0, 1))
        ratios.append(ratio)
        plain_speeds.append(speeds[False][0])
        wall_ratios.append(wall_ratio)
        print(
            f"pair {pair + 1} ({'plain first' if order[0] is False else 'beating first'}): "
            f"plain {speeds[False][0]:.1f}, heartbeats {speeds[True][0]:.1f} steps per CPU s, ratio {ratio:.3f} | "
            f"wall: {speeds[False][1]:.1f} vs {speeds[True][1]:.1f} steps/s, ratio {wall_ratio:.3f}",
            flush=True,
        )
    cost = callback_cost()
    step_cpu = 1 / statistics.median(plain_speeds)
    print(
        f"one on_step_end of HeartbeatCallback: {cost * 1e6:.1f} us of CPU, {100 * cost / step_cpu:.3f}% of this "
        f"tiny model's {step_cpu * 1e3:.1f} ms CPU step"
    )
    print(
        f"median ratio heartbeats/plain over {len(ratios)} pairs: {statistics.median(ratios):.3f} per CPU second "
        f"(range {min(ratios):.3f}-{max(ratios):.3f}; goal >= 0.99), {statistics.median(wall_ratios):.3f} wall-clock "
        f"(range {min(wall_ratios):.3f}-{max(wall_ratios):.3f})"
    )


if __name__ == "__main__":
    main()
