"""Does the model suit the task? Checked from the model's config alone, before any weights load.

A T5 asked to do causal-lm, or a BERT asked to summarize, would otherwise fail deep inside
transformers with a traceback; here it is one sentence naming the model, its kind and the fix.
"""

from __future__ import annotations

from nbtoolkit.spec import BUNDLED_MODELS, RunSpec
from nbtoolkit.train.errors import TrainError

#: what each task needs, in words, with a model that has it
NEEDS = {
    "text-classification": "a model with a sequence-classification head (BERT, RoBERTa, DistilBERT, ...)",
    "question-answering": "a model with an extractive question-answering head (BERT, RoBERTa, DistilBERT, ...)",
    "summarization": "an encoder-decoder (sequence-to-sequence) model such as t5, flan-t5 or bart",
    "causal-lm": "a decoder-only language model such as gpt2, llama or qwen2",
}


def model_kind(config) -> str:
    """encoder-decoder, decoder-only or encoder-only, as the config says."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES, MODEL_FOR_MASKED_LM_MAPPING_NAMES

    if config.is_encoder_decoder:
        return "encoder-decoder"
    if config.model_type in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES and (
            config.model_type not in MODEL_FOR_MASKED_LM_MAPPING_NAMES or getattr(config, "is_decoder", False)):
        return "decoder-only"
    return "encoder-only"


def suits(task: str, config) -> bool:
    from transformers.models.auto import modeling_auto as auto

    kind = model_kind(config)
    if task == "summarization":
        return kind == "encoder-decoder" and config.model_type in auto.MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES
    if task == "causal-lm":
        return kind == "decoder-only"
    if task == "question-answering":
        return config.model_type in auto.MODEL_FOR_QUESTION_ANSWERING_MAPPING_NAMES
    return config.model_type in auto.MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES


def check_pairing(spec: RunSpec, config) -> None:
    """Raise TrainError with one sentence if the model cannot do the spec's task."""
    if suits(spec.task, config):
        return
    raise TrainError(
        f"model '{spec.model_name}' is a {config.model_type} {model_kind(config)} model, but task '{spec.task}' "
        f"needs {NEEDS[spec.task]}; choose such a model, or leave model empty for the bundled "
        f"{BUNDLED_MODELS[spec.task]}"
    )
