"""vision-chat's own spec rules: light (the spec runs `problem` as it is built)."""

from __future__ import annotations

import json

#: SFTConfig fields TRL refuses for a dataset with images (trl/trainer/sft_trainer.py:779-798, TRL 1.16): the field ->
#: the value it refuses and what TRL does not support
NOT_WITH_IMAGES = {
    "packing": (True, "packing"),
    "padding_free": (True, "padding-free batches"),
    "truncation_mode": ("keep_end", "keep_end truncation (it would cut the image tokens at the start)"),
}


def problem(spec) -> str | None:
    """The model's processor renders the conversations with their images: a template of the spec's would be
    ignored, silently, so it is refused; and an `extra` TRL refuses for images would fail the job at its start."""
    if spec.dataset.chat_template is not None:
        return (
            "task vision-chat renders conversations with the model's processor and its own chat template (the one "
            "that places the image tokens); dataset.chat_template would be ignored: remove it"
        )
    for key, (refused, what) in NOT_WITH_IMAGES.items():
        if key in spec.extra and spec.extra[key] == refused:
            return (
                f"extra.{key}: {json.dumps(refused)} is not supported by TRL for conversations with images ({what}); "
                f"task vision-chat cannot train with it: remove extra.{key}"
            )
    return None
