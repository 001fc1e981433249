"""vision-chat: supervised fine-tuning of a vision-language model on conversations with images, on TRL's SFTTrainer.

TRL's own VLM path does the work: given a processor (a ProcessorMixin: trl/trainer/sft_trainer.py:719-721) and rows
with an `images` column (:762), SFTTrainer collates with DataCollatorForVisionLanguageModeling (:981-990), which
renders each conversation with the processor's chat template and turns the images into pixel values batch by batch
(:367-417), the loss on the assistant's tokens alone (`return_assistant_tokens_mask`, :394-416). It skips preparing
such a dataset (:1006-1011), so the images are read as batches form, not all at the start. The rows' formats are
this folder's `formats.py`; the answer to an input with images is `answer.py`.

The vision tower stays frozen (as TRL's VLM examples and LLaMA-Factory's `freeze_vision_tower` default): an adapter
wraps the language model's linear layers only, and without an adapter the tower's weights take no gradient. A
language model learns to answer about what a pretrained tower already sees; the tower's few hundred million
weights would need far more images than a fine-tuning set holds.
"""

from __future__ import annotations

import os
from pathlib import Path

from transformers import AutoModelForImageTextToText
from trl import SFTConfig, SFTTrainer

from nbtoolkit.inputs.bundled import bundled_files
from nbtoolkit.inputs.chat_formats import FormatError
from nbtoolkit.tasks.vision_chat.formats import VISION_FORMAT_NAMES, as_vision_row, detect_vision_format, load_processor
from nbtoolkit.train.errors import TrainError
from nbtoolkit.train.models import load_model
from nbtoolkit.train.task_setup import TaskSetup, trl_overrides

#: the attribute a vision-language model keeps its vision tower under (Gemma 3, LLaVA, Idefics3: vision_tower or
#: vision_model; Qwen2-VL: visual), on its inner `model` in transformers 5
TOWER_NAMES = ("vision_tower", "visual", "vision_model")


def config_class(spec) -> type:
    """The trainer arguments' class: the fields `extra` may set."""
    return SFTConfig


def vision_tower(model):
    """The model's vision tower module."""
    inner = getattr(model, "model", model)
    for name in TOWER_NAMES:
        tower = getattr(inner, name, None)
        if tower is not None:
            return tower
    raise TrainError(
        f"the model ({type(model).__name__}) has no vision tower nbtoolkit can find ({', '.join(TOWER_NAMES)})"
    )


def language_model_linears(model) -> list[str]:
    """The full names of the language model's linear layers (its output head left out): what an adapter wraps."""
    import torch

    language = model.get_decoder()
    inside = {id(module) for module in language.modules()}
    return [
        name for name, module in model.named_modules() if isinstance(module, torch.nn.Linear) and id(module) in inside
    ]


def data_folder(spec, split: str) -> Path | None:
    """The folder image paths are relative to: the split's data file's (None for a hub dataset)."""
    if spec.dataset.name:
        return None
    files = spec.dataset.files or bundled_files(spec.task)
    name = spec.dataset.train_split if split == "train" else spec.dataset.eval_split
    return Path(files[name]).expanduser().resolve().parent if name in files else None


def conversations(spec, dataset, split: str, say: bool = True):
    """The split as TRL's vision rows (messages with image parts, images decoded as batches form), the format said
    once (`say`: in the job's log)."""
    from datasets import Image, List

    try:
        fmt = detect_vision_format(dataset.column_names, spec.dataset.format)
    except FormatError as exc:
        raise TrainError(f"the {split} split: {exc}") from None
    if say and split == "train" and os.environ.get("RANK", "0") == "0":
        how = "detected" if spec.dataset.format == "auto" else "as dataset.format says"
        print(f"[nbtoolkit] dataset format: {fmt}, {VISION_FORMAT_NAMES[fmt]} ({how})", flush=True)
    folder = data_folder(spec, split)
    try:
        rows = dataset.map(
            lambda row, index: as_vision_row(row, fmt, folder, index + 1),
            with_indices=True,
            remove_columns=[name for name in dataset.column_names if name not in ("messages", "images")],
        )
    except FormatError as exc:
        raise TrainError(f"the {split} split: {exc}") from None
    if folder is None:
        return rows  # a hub dataset's images come decoded
    missing = next((path for paths in rows["images"] for path in paths if not Path(path).is_file()), None)
    if missing is not None:
        raise TrainError(
            f"the {split} split names the image {missing}, which does not exist; give paths relative to the data file"
        )
    return rows.cast_column("images", List(Image()))


def setup(spec, splits) -> TaskSetup:
    import transformers
    from packaging.version import Version

    if Version(transformers.__version__) < Version("5.18.0.dev0"):  # TRL's own test (sft_trainer.py:788-796)
        raise TrainError(
            f"task vision-chat needs transformers 5.18 or newer (TRL's loss on the assistant's tokens of a "
            f"conversation with images); this environment has {transformers.__version__}: pip install -U transformers"
        )
    processor = load_processor(spec.model_name)
    if not processor.chat_template:
        raise TrainError(f"model '{spec.model_name}' has no chat template in its processor; give an instruct model's")
    model = load_model(AutoModelForImageTextToText, spec, processor.tokenizer)
    vision_tower(model).requires_grad_(False)
    return TaskSetup(
        model=model,
        tokenizer=processor,
        train_dataset=conversations(spec, splits["train"], "train"),
        eval_dataset=conversations(spec, splits["eval"], "eval") if "eval" in splits else None,
        data_collator=None,
        trainer_class=SFTTrainer,
        arguments_class=config_class(spec),
        argument_overrides=dict(trl_overrides(spec), assistant_only_loss=True, max_length=spec.dataset.max_length),
        adapter_targets=language_model_linears(model),
    )
