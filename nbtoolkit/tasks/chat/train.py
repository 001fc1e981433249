"""chat: supervised fine-tuning on conversations with TRL's SFTTrainer; loss on the assistant's turns by default.

Rows in any format nbtoolkit.inputs.chat_formats knows become `messages`; the chat template (with `{% generation %}`
markers around replies) tells TRL which tokens are the assistant's. `extra` reaches SFTConfig
(e.g. assistant_only_loss: false, packing_strategy, loss_type).
"""

from __future__ import annotations

import os

from transformers import AutoModelForCausalLM
from trl import SFTConfig, SFTTrainer

from nbtoolkit.inputs.chat_formats import FormatError, as_messages, detect_format
from nbtoolkit.train.chat_template import chat_tokenizer, fit_model, loss_template
from nbtoolkit.train.errors import TrainError
from nbtoolkit.train.models import load_model
from nbtoolkit.train.task_setup import TaskSetup, trl_overrides


def config_class(spec) -> type:
    """The trainer arguments' class: the fields `extra` may set."""
    return SFTConfig


def conversations(spec, dataset, split: str):
    """The split as a `messages` column, its format detected (or checked) and said once."""
    try:
        fmt = detect_format(dataset.column_names, spec.dataset.format)
    except FormatError as exc:
        raise TrainError(f"the {split} split: {exc}") from None
    if split == "train" and os.environ.get("RANK", "0") == "0":
        how = "detected" if spec.dataset.format == "auto" else "as dataset.format says"
        print(f"[nbtoolkit] dataset format: {fmt} ({how})", flush=True)
    try:
        return dataset.map(
            lambda row, index: {"messages": as_messages(row, fmt, index + 1)},
            with_indices=True,
            remove_columns=[name for name in dataset.column_names if name != "messages"],
        )
    except FormatError as exc:
        raise TrainError(f"the {split} split: {exc}") from None


def setup(spec, splits) -> TaskSetup:
    tokenizer = chat_tokenizer(spec)
    loss_template(spec, tokenizer)  # a template assistant-only loss cannot use: one sentence before loading weights
    model = load_model(AutoModelForCausalLM, spec, tokenizer)
    fit_model(model, tokenizer)
    return TaskSetup(
        model=model,
        tokenizer=tokenizer,
        train_dataset=conversations(spec, splits["train"], "train"),
        eval_dataset=conversations(spec, splits["eval"], "eval") if "eval" in splits else None,
        data_collator=None,
        trainer_class=SFTTrainer,
        arguments_class=config_class(spec),
        argument_overrides=dict(
            trl_overrides(spec),
            assistant_only_loss=True,
            max_length=spec.dataset.max_length,
            packing=spec.dataset.packing,
        ),
    )
