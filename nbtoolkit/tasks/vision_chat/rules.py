"""vision-chat's own spec rule: light (the spec runs `problem` as it is built)."""

from __future__ import annotations


def problem(spec) -> str | None:
    """The model's processor renders the conversations with their images: a template of the spec's would be
    ignored, silently, so it is refused."""
    if spec.dataset.chat_template is not None:
        return (
            "task vision-chat renders conversations with the model's processor and its own chat template (the one "
            "that places the image tokens); dataset.chat_template would be ignored: remove it"
        )
    return None
