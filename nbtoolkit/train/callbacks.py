"""MetricsCallback: the training program's side of the metrics.jsonl contract (rank 0 only).

Each train record carries the throughput of its logging window: samples/s and tokens/s over
the steps since the previous log, with evaluation and checkpoint time left out, so later
windows show steady-state speed and the first shows warm-up (and compile) cost. The summary
record adds the steady-state figures (warm-up window excluded) next to the Trainer's own
averages, and the process's peak memory.
"""

from __future__ import annotations

import json
import math
import resource
import time
from pathlib import Path

from transformers import TrainerCallback

from nbtoolkit.metrics import budget, cost
from nbtoolkit.metrics.parse import classify
from nbtoolkit.metrics.throughput import steady_state
from nbtoolkit.ranks.heartbeat import CheckpointRequests, Heartbeat


class MetricsCallback(TrainerCallback):
    def __init__(self, path: str | Path, samples_per_step: int, step_offset: int = 0) -> None:
        self.path = Path(path)
        self.samples_per_step = samples_per_step
        self._window_start = time.time()
        self._window_step = step_offset
        self._window_tokens = 0
        self._train_start = time.time()
        self._train_records: list[dict] = []

    def on_train_begin(self, args, state, control, **kwargs):
        self._window_start = self._train_start = time.time()
        self._window_step = state.global_step
        self._window_tokens = state.num_input_tokens_seen

    def on_evaluate(self, args, state, control, **kwargs):
        self._window_start = time.time()  # eval time is not training time

    def on_save(self, args, state, control, **kwargs):
        self._window_start = time.time()

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not state.is_world_process_zero or not logs:
            return
        # None stays, as null: TRL logs a mean of nothing but NaN (a reward of 0/0) as None, and the run doctor
        # must see that series rather than none at all
        numbers = {key: value for key, value in logs.items() if isinstance(value, (int, float)) or value is None}
        kind = classify(numbers)
        if kind is None:
            return
        now = time.time()
        record = {
            "time": now,
            "step": state.global_step,
            "epoch": state.epoch,
            "kind": kind,
            "max_steps": state.max_steps,
        }
        if kind == "train":
            record.update(self._window(state, now))
        record.update(
            {
                key: value if value is not None and math.isfinite(value) else None
                for key, value in numbers.items()
                if key not in ("epoch", "step")
            }
        )
        if kind == "train":
            self._train_records.append(record)
        elif kind == "summary":
            record.update(self._steady_state_and_memory())
        with open(self.path, "a") as handle:
            handle.write(json.dumps(record) + "\n")
        if kind == "train":
            print(progress_line(record, now - self._train_start), flush=True)

    def _window(self, state, now: float) -> dict[str, float]:
        elapsed = max(now - self._window_start, 1e-9)
        steps = state.global_step - self._window_step
        tokens = state.num_input_tokens_seen - self._window_tokens
        self._window_start, self._window_step, self._window_tokens = now, state.global_step, state.num_input_tokens_seen
        if steps <= 0:
            return {}
        window = {
            "samples_per_second": round(steps * self.samples_per_step / elapsed, 3),
            "window_seconds": round(elapsed, 4),
        }
        if tokens > 0:
            window["tokens_per_second"] = round(tokens / elapsed, 3)
        return window

    def _steady_state_and_memory(self) -> dict[str, float]:
        steady = steady_state(self._train_records)
        figures = {
            "steady_samples_per_second": steady.samples_per_second,
            "steady_tokens_per_second": steady.tokens_per_second,
            "warmup_seconds": round(steady.warmup_seconds, 4),
            "peak_memory_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),  # KiB on Linux
            "peak_device_memory_mb": _peak_device_memory_mb(),
        }
        return {key: value for key, value in figures.items() if value is not None}


def _peak_device_memory_mb() -> float | None:
    """What this rank's GPU held at most (tensors the caching allocator handed out), or None off CUDA."""
    import torch

    if not torch.cuda.is_available():
        return None
    return round(torch.cuda.max_memory_allocated() / 2**20, 1)


def progress_line(record: dict, elapsed: float) -> str:
    """One human line per log: `[nbtoolkit] step 20/150 (13%) | loss 1.532 | reward 0.25 | ... | eta 0:12`."""
    step, total = record["step"], record.get("max_steps") or 0
    parts = [f"[nbtoolkit] step {step}/{total}" + (f" ({100 * step // total}%)" if total else "")]
    if record.get("loss") is not None:
        parts.append(f"loss {record['loss']:.4f}")
    if record.get("reward") is not None:  # a grpo run's mean reward: its loss alone says little
        parts.append(f"reward {record['reward']:.4f}")
    if record.get("learning_rate") is not None:
        parts.append(f"lr {record['learning_rate']:.2e}")
    if "samples_per_second" in record:
        parts.append(f"{record['samples_per_second']:.1f} samples/s")
    if "tokens_per_second" in record:
        parts.append(f"{record['tokens_per_second']:.0f} tokens/s")
    if total and step:
        remaining = elapsed / step * (total - step)
        parts.append(f"eta {int(remaining // 60)}:{int(remaining % 60):02d}")
    return " | ".join(parts)


class BudgetCallback(TrainerCallback):
    """train.budget_usd: cost so far by `metrics.cost`, billed from the job's start (start-up included), as
    the listing counts it.

    At 90% rank 0 warns in the log and writes a budget record; at 100% training saves a checkpoint and
    stops, with no evaluation after it (every rank: the decision is agreed over the process group, so no rank
    waits on the others).
    """

    def __init__(self, path: str | Path, budget_usd: float, hourly_price_usd: float) -> None:
        self.path, self.budget_usd, self.hourly_price_usd = Path(path), budget_usd, hourly_price_usd
        self.start = cost.billed_since(default=time.time())
        self.warned = self.stopped = False

    def on_step_end(self, args, state, control, **kwargs):
        now = time.time()
        spent = cost.cost_usd(self.hourly_price_usd, now - self.start)
        reached = _agreed(budget.reached(spent, self.budget_usd), args)
        if reached is None or (reached == "warning" and self.warned):
            return
        self.warned = True
        if reached == "stopped":
            self.stopped = True
            control.should_save = control.should_training_stop = control.should_log = True
            control.should_evaluate = False
        if state.is_world_process_zero:
            record = budget.budget_record(
                time=now, step=state.global_step, cost_usd=spent, budget_usd=self.budget_usd, state=reached
            )
            with open(self.path, "a") as handle:
                handle.write(json.dumps(record) + "\n")
            print(budget.log_line(record), flush=True)

    def on_epoch_end(self, args, state, control, **kwargs):
        """The Trainer ends the epoch it stops in, and its flow asks for that epoch's evaluation: no more spending."""
        if self.stopped:
            control.should_evaluate = False


def _agreed(reached: str | None, args) -> str | None:
    """The furthest state any rank has reached (ranks' clocks differ by a little), the same on every rank."""
    import torch.distributed as dist

    if not dist.is_available() or not dist.is_initialized() or dist.get_world_size() == 1:
        return reached
    import torch

    states = (None, "warning", "stopped")
    furthest = torch.tensor([states.index(reached)], device=args.device)
    dist.all_reduce(furthest, op=dist.ReduceOp.MAX)
    return states[int(furthest.item())]


class HeartbeatCallback(TrainerCallback):
    """Every rank: its heartbeat after each step (see nbtoolkit.ranks.heartbeat), and a save when the job is asked
    for a checkpoint now (`nbtoolkit checkpoint ID`); training then goes on."""

    def __init__(self, job_dir: str | Path) -> None:
        self.heartbeat = Heartbeat(job_dir, can_checkpoint=True)
        self.requests = CheckpointRequests(job_dir)

    def on_step_end(self, args, state, control, **kwargs):
        self.heartbeat.beat(state.global_step)
        if self.requests.due(state.global_step):
            control.should_save = True

    def on_save(self, args, state, control, **kwargs):
        if not self.requests.pending:
            return
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            dist.barrier()  # each rank writes its own files (its RNG state, its ZeRO shards) before rank 0 keeps them
        self.requests.saved(Path(args.output_dir, f"checkpoint-{state.global_step}").resolve())


class LearningRateCallback(TrainerCallback):
    """A run resumed with another train.learning_rate (a fork) trains at it: the checkpoint's optimizer and
    scheduler state carry the old rate, which the Trainer would otherwise keep. The schedule's shape stays."""

    def on_train_begin(self, args, state, control, optimizer=None, lr_scheduler=None, **kwargs):
        base_lrs = getattr(lr_scheduler, "base_lrs", None)
        if optimizer is None or not base_lrs or math.isclose(base_lrs[0], args.learning_rate):
            return
        ratio = args.learning_rate / base_lrs[0]
        lr_scheduler.base_lrs = [rate * ratio for rate in base_lrs]
        for group in optimizer.param_groups:
            group["lr"] *= ratio
            if "initial_lr" in group:
                group["initial_lr"] *= ratio
        if hasattr(lr_scheduler, "_last_lr"):  # what the Trainer logs for the first step
            lr_scheduler._last_lr = [group["lr"] for group in optimizer.param_groups]
        if state.is_world_process_zero:
            print(f"[nbtoolkit] learning rate {base_lrs[0]:.3g} -> {args.learning_rate:.3g} from here", flush=True)
