"""Does the model suit the task? Checked from the model's config alone, before any weights load.

A T5 asked to do causal-lm, or a BERT asked to summarize, would otherwise fail deep inside
transformers with a traceback; here it is one sentence naming the model, its kind and the fix.
"""

from __future__ import annotations

from nbtoolkit.spec import RunSpec
from nbtoolkit.tasks import TASKS
from nbtoolkit.train.errors import TrainError


def model_kind(config) -> str:
    """encoder-decoder, decoder-only or encoder-only, as the config says."""
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
        MODEL_FOR_MASKED_LM_MAPPING_NAMES,
    )

    if config.is_encoder_decoder:
        return "encoder-decoder"
    if config.model_type in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES and (
        config.model_type not in MODEL_FOR_MASKED_LM_MAPPING_NAMES or getattr(config, "is_decoder", False)
    ):
        return "decoder-only"
    return "encoder-only"


def has_head(head: str, config) -> bool:
    """Can a model of this config carry the head (a task registry's `head`)?"""
    from transformers.models.auto import modeling_auto as auto

    kind = model_kind(config)
    found = {
        "seq2seq": lambda: (
            kind == "encoder-decoder" and config.model_type in auto.MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES
        ),
        "causal-lm": lambda: kind == "decoder-only",
        "question-answering": lambda: config.model_type in auto.MODEL_FOR_QUESTION_ANSWERING_MAPPING_NAMES,
        "sequence-classification": lambda: config.model_type in auto.MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES,
        "image-text-to-text": lambda: config.model_type in auto.MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES,
    }
    return found[head]()


def check_pairing(spec: RunSpec, config) -> None:
    """Raise TrainError with one sentence if the model cannot do the spec's task."""
    task = TASKS[spec.task]
    if has_head(task.head, config):
        return
    raise TrainError(
        f"model '{spec.model_name}' is a {config.model_type} {model_kind(config)} model, but task '{spec.task}' "
        f"needs {task.needs}; choose such a model, or leave model empty for the bundled {task.bundled_model}"
    )
