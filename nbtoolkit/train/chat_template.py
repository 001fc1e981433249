"""The chat template a run trains with: the model's own, a named one for a base model, or the spec's text.

One tokenizer carries it from here to the end: the trainer tokenizes with it, `save_model` writes it
beside the weights (with the generation config's end-of-turn token), and predict, merge and push read it
back from there, so training and serving render a conversation token for token alike.
"""

from __future__ import annotations

from nbtoolkit.inputs.chat_formats import (
    NAMED_TEMPLATES,
    assistant_only_loss,
    has_generation_markers,
    no_markers,
    template_source,
)
from nbtoolkit.spec import RunSpec
from nbtoolkit.train.errors import TrainError
from nbtoolkit.train.models import load_tokenizer


def chat_tokenizer(spec: RunSpec):
    """The model's tokenizer with the run's chat template and end-of-turn token; new special tokens it needs added."""
    tokenizer = load_tokenizer(spec.model_name)
    name = spec.dataset.chat_template
    if name in NAMED_TEMPLATES:
        _, specials, end_of_turn = NAMED_TEMPLATES[name]
        missing = [token for token in specials if token not in tokenizer.get_vocab()]
        if missing:
            tokenizer.add_special_tokens({"additional_special_tokens": missing})
        if end_of_turn is not None:
            tokenizer.eos_token = end_of_turn
    if name is not None:
        tokenizer.chat_template = template_source(name)
    if not tokenizer.chat_template:
        raise TrainError(
            f"model '{spec.model_name}' has no chat template (a base model); set dataset.chat_template to "
            f"{' or '.join(NAMED_TEMPLATES)}, or to a Jinja template"
        )
    end_of_turn = template_end_of_turn(tokenizer)
    if end_of_turn is not None and end_of_turn != tokenizer.eos_token:
        # generation (predict, the export's generation config, a GGUF's eos and eot) stops where the template ends
        # the assistant's turn: a Llama-3 template pasted onto its base model ends turns at <|eot_id|>, not eos
        tokenizer.eos_token = end_of_turn
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    # A tokenizer saved without model_input_names takes its class's, which in transformers 4.x name token_type_ids
    # (4.56.2: tokenization_utils_base.py:1388; 5.23 leaves them out, :978): GRPO hands them to generate, which
    # a Llama-shaped model refuses on 4.56.2 (generation/utils.py:1584). A chat model takes no segment ids
    if "token_type_ids" in tokenizer.model_input_names:
        tokenizer.model_input_names = [name for name in tokenizer.model_input_names if name != "token_type_ids"]
    return tokenizer


#: an assistant reply no template writes anything into, to find what the template writes right after a reply
REPLY_MARK = "nbtoolkit-reply-7f3a"


def template_end_of_turn(tokenizer) -> str | None:
    """The special token the tokenizer's chat template closes an assistant turn with: the first one written right
    after a reply; None when a reply is followed by plain text (or the template cannot render a plain exchange)."""
    conversation = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": REPLY_MARK}]
    try:
        text = tokenizer.apply_chat_template(conversation, tokenize=False)
    except Exception:  # a template with demands of its own (a system turn first, roles strictly alternating)
        return None
    after = text.partition(REPLY_MARK)[2]
    specials = set(tokenizer.all_special_tokens) | set(tokenizer.get_added_vocab())
    return next((token for token in sorted(specials, key=len, reverse=True) if after.startswith(token)), None)


def fit_model(model, tokenizer) -> None:
    """Embeddings for tokens the template added, and generation that stops at the template's end of turn."""
    if len(tokenizer) > model.get_input_embeddings().weight.shape[0]:
        model.resize_token_embeddings(len(tokenizer))
    model.config.eos_token_id = tokenizer.eos_token_id
    model.config.pad_token_id = tokenizer.pad_token_id
    if model.generation_config is not None:
        model.generation_config.eos_token_id = tokenizer.eos_token_id
        model.generation_config.pad_token_id = tokenizer.pad_token_id


def loss_template(spec: RunSpec, tokenizer) -> str | None:
    """The template whose markers the trainer masks the loss with: the run's own, or TRL's training version of a
    template it knows (as SFTTrainer swaps it in); None when every token carries loss. TrainError when none."""
    if not assistant_only_loss(spec.task, spec.extra):
        return None
    if has_generation_markers(tokenizer.chat_template):
        return tokenizer.chat_template
    from trl.chat_template_utils import get_training_chat_template

    try:
        return get_training_chat_template(tokenizer)
    except ValueError:
        raise TrainError(no_markers(f"the chat template of model '{spec.model_name}'")) from None
