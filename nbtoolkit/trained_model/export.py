"""A finished job's model written out for serving elsewhere: `nbtoolkit export ID --format merged|gguf`.

The trained chat template travels with the weights, but serving stacks read it from different places: transformers 5
saves it as `chat_template.jinja` alone, llama.cpp's converter takes `tokenizer_config.json`'s before the `.jinja`
file (gguf-py/gguf/vocab.py:335), and older servers read only `tokenizer_config.json` (TGI #3247, ms-swift #4358).
A model that serves another template than it trained with, or never stops, is the step's most reported failure
(LLaMA-Factory #8720, #7785), so the export writes the template identically in both places and gives
`generation_config.json` every end token (the template's end of turn among them); a GGUF is made from that folder
(gguf_export.py). Light: reads and writes JSON; merging an adapter is the training program's (Job.merge),
converting llama.cpp's.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import warnings
from pathlib import Path

from nbtoolkit.backends import LaunchError
from nbtoolkit.tasks import TASKS
from nbtoolkit.trained_model.gguf_export import DEFAULT_QUANT, check_quant, llama_python, write_gguf
from nbtoolkit.trained_model.saved_folders import BASE_DIR, is_adapter_folder

FORMATS = ("merged", "gguf")
TEMPLATE_FILE = "chat_template.jinja"
TOKENIZER_CONFIG = "tokenizer_config.json"
GENERATION_CONFIG = "generation_config.json"
#: what a training run leaves beside its model that a served model does not need
TRAINING_ONLY = ("training_args.bin", BASE_DIR)


class ExportWarning(UserWarning):
    """Something about the exported model the user should know before serving it; the export goes on."""


def export_model(job, fmt: str = "merged", out: str | Path | None = None, quant: str | None = None) -> Path:
    """Write the job's final model as a full model folder (an adapter merged into its base) with its chat template
    and end tokens where every serving stack looks, or that folder converted to one GGUF file (gguf_export.py);
    returns the folder, or the GGUF file. The job's own export/merged, written already (serve writes it first), is
    returned as it is; a folder given with --out must be new or empty."""
    check_format(fmt, quant)
    if job.record.status != "succeeded":
        raise LaunchError(f"job {job.id} is {job.record.status}; only a succeeded job has a final model to export")
    task = job.spec.task
    if fmt == "gguf" and TASKS[task].head != "causal-lm":
        raise LaunchError(
            f"job {job.id} is a {task} job; a GGUF holds a language model (causal-lm, chat, preference, grpo jobs): "
            "export --format merged"
        )
    target = Path(out or job.dir / "export" / fmt).expanduser().resolve()
    if target.exists() and not target.is_dir():
        raise LaunchError(f"{target} is a file; give --out a folder (nothing was written)")
    written = target / (f"model-{quant or DEFAULT_QUANT}.gguf" if fmt == "gguf" else "config.json")
    if out is None and written.is_file():
        return target if fmt == "merged" else written  # the job's own export, made before
    if fmt == "merged" and target.exists() and any(target.iterdir()):
        raise LaunchError(f"{target} is not empty; give --out a new folder (nothing was written)")
    if written.exists():
        raise LaunchError(f"{written} exists; give --out another folder (nothing was written)")
    warn_untrained_end_of_turn(job)
    if fmt == "merged":
        write_merged(job, target)
        return target
    made = not target.exists()
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        with tempfile.TemporaryDirectory(dir=target.parent, prefix=".merged-") as scratch:
            merged = write_merged(job, Path(scratch) / "merged")
            end = token_id(merged, _read(merged / TOKENIZER_CONFIG).get("eos_token"))
            if end is None:
                raise LaunchError(f"job {job.id}'s tokenizer names no end token (eos_token); a GGUF would never stop")
            return write_gguf(merged, target, quant or DEFAULT_QUANT, end, job.record.name)
    except BaseException:
        if made and target.is_dir() and not any(target.iterdir()):
            target.rmdir()  # a failed export leaves no folder behind to refuse the next one
        raise


def write_merged(job, target: Path) -> Path:
    folder = Path(job.model())
    if is_adapter_folder(folder):
        job.merge(target)
    else:
        shutil.copytree(folder, target, ignore=shutil.ignore_patterns(*TRAINING_ONLY), dirs_exist_ok=True)
    write_serving_files(target)
    return target


def warn_untrained_end_of_turn(job) -> None:
    """Warn when a chat job's end-of-turn token carried loss in none of its training rows (the data preview's
    reading of them), so the served model may never stop."""
    if not TASKS[job.spec.task].conversations:
        return
    from nbtoolkit.inputs.data_preview import preview_data
    from nbtoolkit.train.errors import TrainError

    try:
        warning = preview_data(job.spec).warning
    except TrainError as exc:
        warning = f"whether the end-of-turn token was trained is unknown: the training data cannot be read ({exc})"
    if warning:
        warnings.warn(f"job {job.id}: {warning}", ExportWarning, stacklevel=3)


def check_format(fmt: str, quant: str | None = None) -> None:
    """The sentence for a wrong --format or --quant, and for gguf without llama.cpp's environment, before any work."""
    if fmt not in FORMATS:
        raise LaunchError(f"--format '{fmt}' is not an export format; use {' or '.join(FORMATS)}")
    if fmt == "merged" and quant is not None:
        raise LaunchError("--quant is for --format gguf; a merged export keeps the trained weights' own dtype")
    if fmt == "gguf":
        check_quant(quant or DEFAULT_QUANT)
        llama_python()


def write_serving_files(folder: Path) -> None:
    """The chat template identical in tokenizer_config.json and chat_template.jinja, and generation_config.json's
    eos_token_id holding the tokenizer's end token (a chat run's end of turn) beside the model's own."""
    tokenizer_config = _read(folder / TOKENIZER_CONFIG)
    template_file = folder / TEMPLATE_FILE
    template = template_file.read_text() if template_file.is_file() else tokenizer_config.get("chat_template")
    if isinstance(template, str):
        template_file.write_text(template)
        tokenizer_config["chat_template"] = template
        (folder / TOKENIZER_CONFIG).write_text(json.dumps(tokenizer_config, indent=2, ensure_ascii=False) + "\n")
    end = token_id(folder, tokenizer_config.get("eos_token"))
    generation_path = folder / GENERATION_CONFIG
    if end is None or not generation_path.is_file():
        return
    generation = _read(generation_path)
    known = generation.get("eos_token_id")
    ends = [known] if isinstance(known, int) else list(known or [])
    if end not in ends:
        generation["eos_token_id"] = [end, *ends] if ends else end
        generation_path.write_text(json.dumps(generation, indent=2) + "\n")


def has_chat_template(folder: Path) -> bool:
    """Whether a model folder holds a chat template, in either place write_serving_files writes it."""
    return (folder / TEMPLATE_FILE).is_file() or "chat_template" in _read(folder / TOKENIZER_CONFIG)


def token_id(folder: Path, token) -> int | None:
    """The id of a token (a string, or transformers' {"content": ...}) in the folder's tokenizer.json."""
    text = token.get("content") if isinstance(token, dict) else token
    tokenizer = _read(folder / "tokenizer.json")
    if not text or not tokenizer:
        return None
    added = {item["content"]: item["id"] for item in tokenizer.get("added_tokens", [])}
    vocab = tokenizer.get("model", {}).get("vocab")
    if isinstance(vocab, list):  # a Unigram model's [piece, score] pairs, in id order
        vocab = {piece: index for index, (piece, _) in enumerate(vocab)}
    found = added.get(text, (vocab or {}).get(text))
    return found if isinstance(found, int) else None


def _read(path: Path) -> dict:
    return json.loads(path.read_text()) if path.is_file() else {}
