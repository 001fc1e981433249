"""Autolog: nbtoolkit's metrics callback in every Trainer a user's script creates, the script untouched.

A script launch puts autolog_boot/ first on PYTHONPATH; its sitecustomize.py calls `install()` in
every Python process of the job. Nothing happens until the script imports `transformers.trainer`:
then `Trainer.__init__` (subclasses such as Seq2SeqTrainer or TRL's included) ends by adding
MetricsCallback, which writes the records nbtoolkit's own program writes (true step, windows'
samples/s and tokens/s, eval metrics, peak memory) on rank 0. It changes one of the script's TrainingArguments,
what is logged and nothing trained: `logging_nan_inf_filter` off, so a NaN loss is logged as NaN (on, the default,
the Trainer logs a window of NaN steps as 0.0 and the run doctor would read a diverged run as one that converged).
None other: tokens/s comes only where the script counts input tokens itself
(`include_num_input_tokens_seen`); switching the count on cost a gather across ranks per step, and a
warning per step for a model whose batches lack its `main_input_name`. Never breaks a script: a failure
here is one line in the log and the job's log parser stays on.
"""

from __future__ import annotations

import functools
import importlib.abc
import importlib.util
import os
import sys

TRAINER_MODULE = "transformers.trainer"


class TrainerImportHook(importlib.abc.MetaPathFinder):
    """Finds transformers.trainer through the other finders, and patches its Trainer once it has run."""

    def find_spec(self, fullname, path, target=None):
        if fullname != TRAINER_MODULE:
            return None
        sys.meta_path.remove(self)  # once; and the lookup below must not come back here
        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None:
            return spec
        execute = spec.loader.exec_module

        def exec_module(module):
            execute(module)
            try:
                patch_trainer(module.Trainer)
            except Exception as exc:
                say_off(exc)

        spec.loader.exec_module = exec_module
        return spec


def install() -> None:
    """Watch for transformers.trainer (a no-op if it is loaded already: a script imports it later)."""
    if TRAINER_MODULE not in sys.modules and not any(isinstance(f, TrainerImportHook) for f in sys.meta_path):
        sys.meta_path.insert(0, TrainerImportHook())


def patch_trainer(trainer_class: type) -> None:
    init = trainer_class.__init__

    @functools.wraps(init)
    def __init__(self, *args, **kwargs):
        init(self, *args, **kwargs)
        try:
            add_metrics_callback(self)
        except Exception as exc:
            say_off(exc)

    trainer_class.__init__ = __init__


def add_metrics_callback(trainer) -> None:
    """MetricsCallback on this Trainer (once, also when a subclass's __init__ runs the patched one)."""
    from nbtoolkit.launching.launch import JOB_DIR_ENV
    from nbtoolkit.ranks.report import is_rank_zero, job_metrics_file
    from nbtoolkit.train.callbacks import HeartbeatCallback, MetricsCallback

    if os.environ.get(JOB_DIR_ENV) is None:
        return  # not a job
    args = trainer.args
    args.logging_nan_inf_filter = False  # read at every step of the training loop
    callbacks = trainer.callback_handler.callbacks
    if not any(isinstance(callback, HeartbeatCallback) for callback in callbacks):  # every rank beats
        trainer.add_callback(HeartbeatCallback(os.environ[JOB_DIR_ENV]))
    if not is_rank_zero() or any(isinstance(callback, MetricsCallback) for callback in callbacks):
        return
    path = job_metrics_file()
    samples_per_step = args.per_device_train_batch_size * args.gradient_accumulation_steps * args.world_size
    trainer.add_callback(MetricsCallback(path, samples_per_step))


def say_off(exc: Exception) -> None:
    print(
        f"[nbtoolkit] metrics autolog is off for this script ({type(exc).__name__}: {exc}); "
        "metrics come from its log instead",
        file=sys.stderr,
        flush=True,
    )
