"""`python -m nbtoolkit.train.inference`: a finished job's model answering new inputs, or evaluated on other data.

Run apart from the notebook kernel (which never imports torch), in the job directory: `Job.evaluate` runs it
once; `Job.predict` and Try-it keep one running with the model loaded (`--serve`, see nbtoolkit.trained_model.warm_model). The model is the job's final one (output/model) or a chosen checkpoint; a
run with an adapter is its base (saved beside the adapter at the start) with the adapter on top.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import sys
import traceback
from pathlib import Path

from nbtoolkit.launching.runtime import ERROR_PREFIX, SPEC_FILE
from nbtoolkit.spec import RunSpec, SpecError, load_spec
from nbtoolkit.tasks import TASKS, hook
from nbtoolkit.train.errors import TrainError

MODEL_DIR = Path("output") / "model"
#: new tokens a summary or a continuation may have
MAX_NEW_TOKENS = 64


def trained_model(spec: RunSpec, checkpoint: str | None = None):
    """(model, tokenizer) of the job's final model, or of `checkpoint` (a checkpoint-N folder); the tokenizer is the
    saved processor where the job saved one (a vision-language model's: image processor, tokenizer, template)."""
    from transformers import AutoProcessor, AutoTokenizer

    from nbtoolkit.train.adapters import auto_class
    from nbtoolkit.trained_model.saved_folders import BASE_DIR, base_weights

    where = Path(checkpoint) if checkpoint else MODEL_DIR
    if not where.is_dir():
        raise TrainError(
            f"{where} does not exist; the job saves its final model in {MODEL_DIR} when it succeeds, "
            "and checkpoints under output/ when train.save_steps is set"
        )
    if (where / "adapter_config.json").is_file():
        from peft import PeftModel
        from transformers import AutoConfig

        from nbtoolkit.train.models import model_source

        weights = base_weights(MODEL_DIR, model_source(spec.model_name))
        base = auto_class(spec.task).from_pretrained(weights, config=AutoConfig.from_pretrained(MODEL_DIR / BASE_DIR))
        model = PeftModel.from_pretrained(base, where)
    else:
        model = auto_class(spec.task).from_pretrained(where)
    saved = where if (where / "tokenizer_config.json").is_file() else MODEL_DIR
    if (saved / "processor_config.json").is_file():
        tokenizer = AutoProcessor.from_pretrained(saved)
    else:
        tokenizer = AutoTokenizer.from_pretrained(saved)
    text = getattr(tokenizer, "tokenizer", tokenizer)
    if text.pad_token is None:
        text.pad_token = text.eos_token
    return model.eval(), tokenizer


def answer(spec: RunSpec, model, tokenizer, inputs: list) -> list[dict]:
    """One answer per input, in the task's terms (its answering function: nbtoolkit/tasks/<task>/answer.py)."""
    import torch

    respond = hook(TASKS[spec.task].answer)
    with torch.no_grad():
        return [respond(spec, model, tokenizer, item) for item in inputs]


def model_files(where: Path) -> tuple:
    """What tells a model folder's weights apart: its files' names, sizes and times (and the spec's), so that a
    warm process notices a folder rewritten (a checkpoint saved again, a job folder replaced) and loads it anew."""
    files = [Path(SPEC_FILE), *sorted(path for path in where.rglob("*") if path.is_file())] if where.is_dir() else []
    return tuple((str(path), path.stat().st_mtime_ns, path.stat().st_size) for path in files)


def serve(job_dir: Path, idle_s: float, replies) -> None:
    """Answer requests until stdin ends (the caller is gone) or none comes for `idle_s` seconds: one JSON line in
    (`{"inputs": [...], "checkpoint": null}`), one JSON line out (`{"answers": [...]}` or `{"error": sentence}`).
    The model stays loaded between requests; a request for another checkpoint, or after the model's files
    changed, loads it again. Each request starts in the job folder afresh (it may have been replaced)."""
    loaded: tuple = ((), None)  # (what was loaded, (model, tokenizer)): one model at a time
    while select.select([sys.stdin], [], [], idle_s)[0]:
        line = sys.stdin.readline()
        if not line:
            return
        request = json.loads(line)
        try:
            try:
                os.chdir(job_dir)
            except FileNotFoundError:
                raise TrainError(f"the job folder {job_dir} no longer exists") from None
            spec = load_spec(Path(SPEC_FILE))
            checkpoint = request.get("checkpoint")
            key = (checkpoint, model_files(Path(checkpoint) if checkpoint else MODEL_DIR))
            if key != loaded[0]:
                loaded = ((), None)  # the old model goes before the new one loads
                loaded = (key, trained_model(spec, checkpoint))
            os.chdir(request.get("cwd") or job_dir)  # a file an input names (an image) is where the caller sees it
            reply: dict = {"answers": answer(spec, *loaded[1], request["inputs"])}
        except (SpecError, TrainError) as exc:
            reply = {"error": str(exc)}
        except Exception:  # the caller says it as the program's failure, with the traceback's end
            reply = {"failed": traceback.format_exc()[-500:]}
        print(json.dumps(reply), file=replies, flush=True)


def evaluate(spec: RunSpec, dataset: str) -> dict:
    """The final model's eval metrics on another split of the spec's dataset, or on a local file.

    With an adapter, on the merged model (the same predictions as base + adapter, see adapters.merge).
    """
    from nbtoolkit.inputs.bundled import bundled_files
    from nbtoolkit.inputs.data_files import check_file
    from nbtoolkit.train.adapters import full_model
    from nbtoolkit.train.predict import cpu_spec, evaluate_model

    changes: dict = {"eval_split": dataset, "max_eval_samples": None}
    if Path(dataset).suffix:  # a local file is the eval split; the job's train split still names the labels
        path = Path(dataset).expanduser().resolve()
        if not path.is_file():
            raise TrainError(
                f"dataset {dataset} does not exist; give a local .jsonl/.json/.csv/.parquet file "
                "or a split name of the job's dataset"
            )
        if spec.dataset.name:
            raise TrainError(
                f"evaluating on a file needs the job's training data as local files, and it trained on "
                f"the hub dataset {spec.dataset.name}; give a split name of it instead"
            )
        check_file(spec, path, f"the file to evaluate on ({path})")  # as launch checks the job's own files
        train = (spec.dataset.files or bundled_files(spec.task))[spec.dataset.train_split]
        changes.update(files={spec.dataset.train_split: train, "evaluate": str(path)}, eval_split="evaluate")
    elif spec.dataset.files and dataset not in spec.dataset.files:
        raise TrainError(
            f"the job's dataset has no '{dataset}' split (it has "
            f"{', '.join(spec.dataset.files)}); give a split it has or a file"
        )
    data = cpu_spec(spec, full_model(MODEL_DIR, spec).resolve()).model_dump(mode="json")
    data["dataset"].update(changes)
    return evaluate_model(
        RunSpec.model_validate(data), MODEL_DIR.parent / "evaluate", needs="evaluate", reference=lambda: start(spec)
    )


def start(spec: RunSpec):
    """The job's model before it trained, on CPU: an adapter run's saved base (as merge loads it), else the spec's
    model (a bundled one built again from the run's seed, as the run built it: from the same RNG state)."""
    from transformers import AutoModelForCausalLM, set_seed

    from nbtoolkit.train.adapters import saved_base
    from nbtoolkit.train.chat_template import chat_tokenizer, fit_model
    from nbtoolkit.train.models import load_model
    from nbtoolkit.train.predict import cpu_spec

    if spec.adapter is not None:
        return saved_base(MODEL_DIR, spec)
    started = cpu_spec(spec, spec.model_name)
    set_seed(spec.train.seed)
    tokenizer = chat_tokenizer(started)
    model = load_model(AutoModelForCausalLM, started, tokenizer)
    fit_model(model, tokenizer)
    return model


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m nbtoolkit.train.inference", description=__doc__)
    parser.add_argument("--spec", default=SPEC_FILE)
    parser.add_argument("--serve", action="store_true", help="answer JSON-line requests on stdin (see serve)")
    parser.add_argument("--idle-s", type=float, default=300.0, help="with --serve: end after this long without one")
    parser.add_argument("--evaluate", metavar="SPLIT_OR_FILE", help="evaluate the final model on this data")
    args = parser.parse_args(argv)
    from nbtoolkit.train.program import quiet_libraries

    quiet_libraries()
    if args.serve:
        replies = os.fdopen(os.dup(1), "w")  # the replies' own channel: anything else printed goes to stderr
        os.dup2(2, 1)
        serve(Path.cwd(), args.idle_s, replies)
        return 0
    if not args.evaluate:
        parser.error("give --serve or --evaluate SPLIT_OR_FILE")
    try:
        answers = evaluate(load_spec(Path(args.spec)), args.evaluate)
    except (SpecError, TrainError) as exc:
        print(f"{ERROR_PREFIX} {exc}", file=sys.stderr, flush=True)
        return 2
    print(json.dumps(answers))
    return 0


if __name__ == "__main__":
    sys.exit(main())
