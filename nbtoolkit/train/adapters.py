"""PEFT adapters in the training program: check the targets, wrap the model, save, merge.

The targets are checked against the model's own module names, built on the meta device from
its config (no weights load), so a wrong name is one sentence before any training starts.
The run saves the adapter alone; a base that exists nowhere else (a bundled tiny model built at run
time, an earlier job's adapter merged at load, a model from a SageMaker input channel) is saved once
beside it so that `merge` can rebuild the same model.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from nbtoolkit.hardware.precision import SAVE_DTYPES, save_dtype
from nbtoolkit.inputs.bundled import is_bundled
from nbtoolkit.spec import AdapterSpec, RunSpec
from nbtoolkit.spec_parts.adapters import ALL_LINEAR, missing_package, target_modules
from nbtoolkit.tasks import TASKS
from nbtoolkit.train.errors import TrainError
from nbtoolkit.train.models import as_loaded, base_made_here, model_source
from nbtoolkit.trained_model.saved_folders import ADAPTER_CONFIG, BASE_DIR, base_weights, is_adapter_folder

#: task heads PEFT trains whole (its modules_to_save for SEQ_CLS and QUESTION_ANS): all-linear must not wrap them too
TASK_HEADS = ["classifier", "score", "qa_outputs"]


def auto_class(task: str):
    import transformers

    return getattr(transformers, TASKS[task].auto_model)


def linear_module_names(task: str, config) -> set[str]:
    """The last name part of every linear layer of the task's model, built on the meta device."""
    import torch
    from transformers.pytorch_utils import Conv1D

    with torch.device("meta"):
        model = auto_class(task).from_config(config)
    return {
        name.rpartition(".")[2]
        for name, module in model.named_modules()
        if isinstance(module, (torch.nn.Linear, Conv1D))
    }


def check_adapter(spec: RunSpec, config) -> None:
    """One sentence, before any weights load, if the adapter cannot run on this model or machine."""
    if missing_package(spec):
        raise TrainError(missing_package(spec))
    if spec.adapter.type == "qlora":
        if is_bundled(spec.model_name):
            raise TrainError(
                f"adapter.type 'qlora' quantizes pretrained weights as they load, but "
                f"{spec.model_name} is built at run time; use type: lora or a hub/local model"
            )
        if is_adapter_folder(model_source(spec.model_name)):
            raise TrainError(
                f"adapter.type 'qlora' quantizes pretrained weights as they load, but {spec.model_name} is an "
                "adapter merged into its base at load; merge it first (`nbtoolkit merge ID`) and start from the "
                "merged folder, or use type: lora"
            )
        if importlib.util.find_spec("bitsandbytes") is None:
            raise TrainError(
                "adapter.type 'qlora' needs bitsandbytes, which is not installed here; "
                "pip install bitsandbytes on the CUDA machine, or use type: lora"
            )
    problem = missing_targets(spec, config)
    if problem:
        raise TrainError(problem)


def missing_targets(spec: RunSpec, config) -> str | None:
    """One sentence if adapter.target_modules names a module the model has no linear layer of (all-linear fits)."""
    wanted = target_modules(spec.adapter)
    if wanted == ALL_LINEAR:
        return None
    found = linear_module_names(spec.task, config)
    missing = [name for name in wanted if name not in found]
    if not missing:
        return None
    return (
        f"adapter.target_modules {', '.join(missing)} not found in model '{spec.model_name}' "
        f"({config.model_type}); its linear layers are {', '.join(sorted(found))}"
    )


def wrap(model, spec: RunSpec, default_targets: list[str] | None = None):
    """The model with the spec's adapters: base weights frozen, adapters (and a new task head) trainable.

    `default_targets`: the modules to wrap when the spec names none (the task's choice), else every linear layer."""
    import torch
    from peft import LoraConfig, get_peft_model, prepare_model_for_kbit_training

    adapter: AdapterSpec = spec.adapter
    if adapter.type == "qlora":
        model = prepare_model_for_kbit_training(model, use_gradient_checkpointing=spec.gradient_checkpointing)
    targets = default_targets if default_targets and not adapter.target_modules else target_modules(adapter)
    config = LoraConfig(
        task_type=TASKS[spec.task].peft_task_type,
        r=adapter.r,
        lora_alpha=adapter.alpha,
        lora_dropout=adapter.dropout,
        target_modules=targets,
        exclude_modules=TASK_HEADS if targets == ALL_LINEAR else None,
    )
    wrapped = get_peft_model(model, config)
    for parameter in wrapped.parameters():  # PEFT casts its adapters to fp32, not a task head it trains whole
        if parameter.requires_grad and parameter.dtype != torch.float32:  # (modules_to_save): fp32 master weights
            parameter.data = parameter.data.float()
    return wrapped


def save_base(model, spec: RunSpec, model_dir: str | Path, *, model_is_copy: bool = False) -> None:
    """Before wrapping: the base's config (with the task's labels), and its weights when they exist nowhere else
    (`model_is_copy`: the model folder is this run's copy, as a remote job's input channel is)."""
    target = Path(model_dir) / BASE_DIR
    if model_is_copy or base_made_here(spec):
        model.save_pretrained(target)
    else:
        model.config.save_pretrained(target)


def saved_base(model_dir: Path, spec: RunSpec, dtype: str | None = None):
    """The base an adapter run trained on (as save_base left it), in the dtype its checkpoint was saved in or
    `dtype`."""
    from transformers import AutoConfig

    base_dir = model_dir / BASE_DIR
    config = AutoConfig.from_pretrained(base_dir)
    weights = base_weights(model_dir, model_source(spec.model_name))
    saved_in = getattr(AutoConfig.from_pretrained(weights), "dtype", None)
    return auto_class(spec.task).from_pretrained(weights, config=config, **as_loaded(dtype or saved_in or "float32"))


def merge(model_dir: str | Path, out: str | Path, spec: RunSpec, dtype: str | None = None) -> Path:
    """Base + adapter -> one full model in `out` (weights merged, loadable without PEFT), in the dtype the base
    checkpoint was saved in (not the one the run loaded it in: a bf16 hub model trained on CPU merges as bf16), or
    in `dtype`."""
    from peft import PeftModel
    from transformers import AutoTokenizer

    model_dir, out = Path(model_dir), Path(out)
    if not (model_dir / ADAPTER_CONFIG).is_file():
        raise TrainError(f"{model_dir} holds no adapter to merge; merge applies to runs with an adapter block")
    if dtype is not None:
        try:
            dtype = save_dtype(dtype)
        except ValueError as exc:
            raise TrainError(f"merge {exc}") from None
    merged = PeftModel.from_pretrained(saved_base(model_dir, spec, dtype), model_dir).merge_and_unload()
    merged.save_pretrained(out)
    AutoTokenizer.from_pretrained(model_dir).save_pretrained(out)
    return out


def full_model(model_dir: Path, spec: RunSpec) -> Path:
    """The run's final model as a full model: `model_dir` itself, or with an adapter its merge (made once)."""
    if not (model_dir / ADAPTER_CONFIG).is_file():
        return model_dir
    merged = model_dir.parent / "merged"
    if not (merged / "config.json").is_file():
        merge(model_dir, merged, spec)
    return merged


def main(argv: list[str] | None = None) -> int:
    """`python -m nbtoolkit.train.adapters merge`: run apart from the caller, which never imports torch."""
    import argparse
    import sys

    from nbtoolkit.launching.runtime import ERROR_PREFIX
    from nbtoolkit.spec import load_spec

    parser = argparse.ArgumentParser(prog="python -m nbtoolkit.train.adapters", description=merge.__doc__)
    parser.add_argument("action", choices=["merge"])
    parser.add_argument("--spec", required=True, help="spec.json of the run")
    parser.add_argument("--model-dir", required=True, help="where the run saved its adapter")
    parser.add_argument("--out", required=True, help="where the merged model goes")
    parser.add_argument("--dtype", choices=SAVE_DTYPES, help="default: the dtype the base was saved in")
    args = parser.parse_args(argv)
    try:
        print(merge(args.model_dir, args.out, load_spec(Path(args.spec)), args.dtype))
    except TrainError as exc:
        print(f"{ERROR_PREFIX} {exc}", file=sys.stderr, flush=True)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
