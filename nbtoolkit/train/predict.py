"""`python -m nbtoolkit.train.predict --spec spec.json`: evaluate the trained model on CPU.

The Neuron backend's last stage. On Trainium every new shape compiles a new graph, so generation
(summaries grow token by token) runs on CPU after training, as in the Neuron T5 tutorial:
NEURON_NUM_DEVICES=0, and libneuronxla kept from configuring the XLA devices. Appends one eval
record (`"stage": "predict"`) at the last training step to metrics.jsonl.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from nbtoolkit.launching.runtime import ERROR_PREFIX
from nbtoolkit.spec import RunSpec, SpecError, load_spec

#: settings of the training run that do not apply to an evaluation on CPU
#: (an adapter too: the model evaluated is the full one, merged with it)
TRAINING_ONLY = (
    "hardware",
    "parallelism",
    "precision",
    "compile",
    "launcher",
    "neuron",
    "resume",
    "sagemaker",
    "adapter",
    "report_to",
)


def keep_off_neuron() -> None:
    """The tutorial's lines before transformers is imported: no XLA device configuration."""
    try:
        import libneuronxla
    except ImportError:
        return
    libneuronxla.configure_environment = lambda: None


def cpu_spec(spec: RunSpec, model: str | Path) -> RunSpec:
    """The run's data and task, with `model` (the trained one, or the one it started from), on CPU, generating
    where the task can."""
    data = {key: value for key, value in spec.model_dump(mode="json").items() if key not in TRAINING_ONLY}
    data["model"] = str(model)
    data["train"]["predict_with_generate"] = True
    return RunSpec.model_validate(data)


def evaluate_model(spec: RunSpec, output_dir: Path, needs: str, reference: Callable[[], Any] | None = None) -> dict:
    """The spec's model evaluated on the spec's eval split on CPU: the task's metrics (`needs` names the caller).
    `reference` builds the model DPO and KTO measure against: the task's own is a copy of the model it loaded, which
    for a trained model makes every reward 0 and the loss log 2."""
    from transformers import Trainer

    from nbtoolkit.train.data import load_splits
    from nbtoolkit.train.errors import TrainError
    from nbtoolkit.train.program import training_arguments
    from nbtoolkit.train.task_setup import setup_task, trainer_arguments

    task = setup_task(spec, load_splits(spec))
    if task.eval_dataset is None:
        raise TrainError(
            f"{needs} needs an eval split, and the dataset has no '{spec.dataset.eval_split}' split; "
            "name a split it has, or a local file"
        )
    # the task's own arguments class: a chat job's TRL settings (assistant_only_loss, ...) are SFTConfig's
    args = training_arguments(
        spec, str(output_dir), has_eval=True, arguments_class=task.arguments_class, **task.argument_overrides
    )
    if reference is not None and task.trainer_arguments.pop("ref_model", None) is not None:  # the copy goes first
        task.trainer_arguments["ref_model"] = reference().eval().requires_grad_(False)
    trainer = (task.trainer_class or Trainer)(
        model=task.model,
        args=args,
        train_dataset=task.train_dataset,  # TRL's trainers refuse to start without one, even to evaluate
        eval_dataset=task.eval_dataset,
        processing_class=task.tokenizer,
        **trainer_arguments(task),
    )
    return trainer.evaluate()


def predict(spec: RunSpec, metrics_path: str, output_dir: str) -> dict:
    from nbtoolkit.metrics.series import read_metrics
    from nbtoolkit.train.adapters import full_model
    from nbtoolkit.train.errors import TrainError
    from nbtoolkit.train.program import quiet_libraries

    quiet_libraries()
    model_dir = Path(output_dir) / "model"
    if not (model_dir / "config.json").is_file() and not (model_dir / "adapter_config.json").is_file():
        raise TrainError(f"there is no trained model in {model_dir} to predict with; the train stage saves it there")
    model_dir = full_model(model_dir, spec)
    # the tutorial's --do_predict split (test), not the split training evaluated on (validation)
    predicted = spec.model_copy(
        update={"dataset": spec.dataset.model_copy(update={"eval_split": spec.neuron.predict_split})}
    )
    metrics = evaluate_model(cpu_spec(predicted, model_dir), Path(output_dir) / "predict", needs="neuron.predict")
    steps = [record["step"] for record in read_metrics(metrics_path) if record.get("kind") == "train"]
    record = {
        "time": time.time(),
        "step": max(steps, default=0),
        "kind": "eval",
        "stage": "predict",
        **{
            key: value if math.isfinite(value) else None
            for key, value in metrics.items()
            if isinstance(value, (int, float)) and key != "epoch"
        },
    }
    with open(metrics_path, "a") as handle:
        handle.write(json.dumps(record) + "\n")
    shown = ", ".join(
        f"{key} {value:.4f}"
        for key, value in metrics.items()
        if key.startswith("eval_") and not key.endswith(("runtime", "per_second", "time"))
    )
    print(f"[nbtoolkit] predict on CPU: {shown}", flush=True)
    return metrics


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m nbtoolkit.train.predict", description=__doc__)
    parser.add_argument("--spec", required=True, help="spec.json of the run")
    parser.add_argument("--metrics", default="metrics.jsonl")
    parser.add_argument("--output-dir", default="output", help="where the train stage saved model/")
    args = parser.parse_args(argv)
    os.environ.setdefault("NEURON_NUM_DEVICES", "0")
    keep_off_neuron()
    from nbtoolkit.train.errors import TrainError

    try:
        predict(load_spec(Path(args.spec)), args.metrics, args.output_dir)
    except (SpecError, TrainError) as exc:
        print(f"{ERROR_PREFIX} {exc}", file=sys.stderr, flush=True)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
