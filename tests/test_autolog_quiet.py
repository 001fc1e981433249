"""Autolog changes nothing a script asked for but how a NaN loss is logged, and says nothing where it has nothing
to do: it leaves the Trainer's token count as the script set it (switching it on cost a gather across ranks per
step, and a warning per step for a model whose batch lacks its main input), and an interpreter the job starts that
has no nbtoolkit (a tool's own Python) starts silently."""

from __future__ import annotations

import os
import subprocess
import sys
from types import SimpleNamespace

from nbtoolkit.backends.program import AUTOLOG_BOOT
from nbtoolkit.train.autolog import add_metrics_callback
from nbtoolkit.train.callbacks import MetricsCallback


def test_autolog_leaves_the_scripts_token_count_off(tmp_path, monkeypatch):
    from transformers import TrainingArguments

    monkeypatch.setenv("NBTOOLKIT_JOB_DIR", str(tmp_path))
    args = TrainingArguments(output_dir=str(tmp_path / "out"), use_cpu=True, report_to="none")
    added = []
    trainer = SimpleNamespace(args=args, callback_handler=SimpleNamespace(callbacks=[]), add_callback=added.append)
    add_metrics_callback(trainer)
    assert args.include_num_input_tokens_seen == "no"  # as the script left it: no gather, no per-step warning
    assert any(isinstance(callback, MetricsCallback) for callback in added)


def test_autolog_has_a_scripts_trainer_log_a_nan_loss_as_nan(tmp_path, monkeypatch):
    """The one argument autolog changes: with transformers' default logging_nan_inf_filter a window of NaN steps is
    logged as loss 0.0, and the run doctor read a diverged script job as a converged one ("succeeded")."""
    import math

    import torch
    from transformers import Trainer, TrainingArguments

    class Diverged(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.ones(1))

        def forward(self, x):
            return {"loss": (self.weight * x).sum() * float("nan")}

    monkeypatch.setenv("NBTOOLKIT_JOB_DIR", str(tmp_path))
    args = TrainingArguments(
        output_dir=str(tmp_path / "out"), use_cpu=True, report_to="none", max_steps=2, logging_steps=2
    )
    environ = dict(os.environ)
    try:
        with torch.random.fork_rng():  # the Trainer seeds torch's global generator
            trainer = Trainer(model=Diverged(), args=args, train_dataset=[{"x": torch.ones(1)}] * 4)
            add_metrics_callback(trainer)
            trainer.train()
    finally:  # nothing of this in-process Trainer outlives the test: accelerate's shared state, variables it set
        from accelerate.state import AcceleratorState

        AcceleratorState._reset_state(reset_partial_state=True)
        os.environ.clear()
        os.environ.update(environ)
    (logged,) = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    assert math.isnan(logged)  # 0.0 with the filter on


def test_an_interpreter_without_nbtoolkit_starts_silently_under_the_autolog_boot(tmp_path):
    """As a job's PYTHONPATH reaches every Python it starts: one that cannot import nbtoolkit has nothing to say."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "bare")], check=True)
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(AUTOLOG_BOOT), "NBTOOLKIT_JOB_DIR": str(tmp_path)}
    probe = "import importlib.util; print(importlib.util.find_spec('nbtoolkit') is None)"
    bare = tmp_path / "bare" / "bin" / "python"
    result = subprocess.run([bare, "-c", probe], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert (result.stdout, result.stderr) == ("True\n", "")
