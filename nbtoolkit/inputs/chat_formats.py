"""Chat data formats and chat templates as data: detect a dataset's format, turn its rows into conversations.

Light (no transformers, no datasets): the spec, the data preview and the training program share it,
so `nbtoolkit data` renders a conversation exactly as the chat task trains on it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, Literal

from nbtoolkit.tasks import TASKS

ChatFormat = Literal["auto", "messages", "sharegpt", "alpaca", "prompt-completion"]
#: the columns that identify each format, checked in this order (the first whose columns a row has wins)
FORMAT_COLUMNS: dict[str, tuple[str, ...]] = {
    "messages": ("messages",),
    "sharegpt": ("conversations",),
    "alpaca": ("instruction", "output"),
    "prompt-completion": ("prompt", "completion"),
}
#: the keys of one turn: OpenAI's (messages) and ShareGPT's (conversations); either is read in both columns
TURN_KEYS = (("role", "content"), ("from", "value"))
#: ShareGPT's speaker names -> the roles chat templates know
SHAREGPT_ROLES = {"human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant", "system": "system"}

#: ChatML (Qwen's layout), with TRL's `{% generation %}` markers around what the assistant says, its
#: end-of-turn token included, so that assistant-only loss masks exactly the tokens a reply is made of.
CHATML = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' }}"
    "{%- if message['role'] == 'assistant' %}"
    "{% generation %}{{- message['content'] + '<|im_end|>' }}{% endgeneration %}{{- '\\n' }}"
    "{%- else %}{{- message['content'] + '<|im_end|>\\n' }}{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)
#: Zephyr's layout (`<|user|>` ... `</s>`), end-of-turn is the tokenizer's eos
ZEPHYR = (
    "{%- for message in messages %}"
    "{{- '<|' + message['role'] + '|>\\n' }}"
    "{%- if message['role'] == 'assistant' %}"
    "{% generation %}{{- message['content'] + eos_token }}{% endgeneration %}{{- '\\n' }}"
    "{%- else %}{{- message['content'] + eos_token + '\\n' }}{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|assistant|>\\n' }}{%- endif %}"
)


#: dataset.chat_template by name -> (template, special tokens it adds, end-of-turn token or None for eos)
NAMED_TEMPLATES: dict[str, tuple[str, tuple[str, ...], str | None]] = {
    "chatml": (CHATML, ("<|im_start|>", "<|im_end|>"), "<|im_end|>"),
    "zephyr": (ZEPHYR, ("<|user|>", "<|assistant|>", "<|system|>"), None),
}


def assistant_only_loss(task: str, extra: dict[str, Any]) -> bool:
    """Whether a run's loss is on the assistant's turns only: task chat's default, unless extra turns it off."""
    return TASKS[task].conversations and extra.get("assistant_only_loss", True) is not False


def has_generation_markers(template: str) -> bool:
    """Whether a template marks the assistant's tokens (`{% generation %}`, any whitespace trim), as TRL checks."""
    return re.search(r"\{%-?\s*generation\s*-?%\}", template) is not None


def no_markers(whose: str) -> str:
    """The one sentence for a template assistant-only loss cannot use."""
    return (
        f"{whose} has no {{% generation %}} markers, so the loss on assistant turns only cannot find the "
        f"assistant's tokens; set extra: {{assistant_only_loss: false}} to train on every token, or "
        f"dataset.chat_template to a named template with markers ({' or '.join(NAMED_TEMPLATES)})"
    )


class FormatError(ValueError):
    """Rows in no known chat format, or not in the one the spec names; the message is one sentence."""


def needed_columns(formats: dict[str, tuple[str, ...]] = FORMAT_COLUMNS) -> str:
    """The columns each format needs, in words (for the one sentence a file in no format gets)."""
    return "; ".join(f"{name}: {' + '.join(columns)}" for name, columns in formats.items())


def detect_format(
    columns: Iterable[str],
    declared: str = "auto",
    formats: dict[str, tuple[str, ...]] = FORMAT_COLUMNS,
    kind: str = "chat",
) -> str:
    """The format of rows with these columns among `formats` (format -> the columns it needs; `kind` names them in
    the sentence): the declared one (checked), or with auto the first that fits."""
    have = set(columns)
    if declared != "auto":
        if declared not in formats:
            raise FormatError(f"dataset.format '{declared}' is no {kind} format; use {' or '.join(formats)} or auto")
        missing = [column for column in formats[declared] if column not in have]
        if missing:
            raise FormatError(
                f"dataset.format '{declared}' needs the column(s) {', '.join(missing)}, but the data has "
                f"{', '.join(sorted(have)) or 'no columns'}; rename them or use format: auto"
            )
        return declared
    for name, wanted in formats.items():
        if have.issuperset(wanted):
            return name
    raise FormatError(
        f"the data is in no {kind} format nbtoolkit knows (its columns are {', '.join(sorted(have)) or 'none'}); "
        f"give one of {needed_columns(formats)}"
    )


def as_messages(row: dict[str, Any], fmt: str, number: int | None = None) -> list[dict[str, str]]:
    """One row of a detected format as a conversation (role/content messages); `number` counts rows from 1."""
    where = f"row {number}" if number is not None else "a row"
    if fmt in ("messages", "sharegpt"):
        column = FORMAT_COLUMNS[fmt][0]
        turns = row[column]
        if not isinstance(turns, list) or not turns:
            raise FormatError(f"{where}'s {column} is {turns!r}; it must be a list of turns")
        return as_turns(turns, "user", f"{where}'s {column}")
    if fmt == "alpaca":
        asked = _text(row["instruction"], f"{where}'s instruction")
        extra = f"\n\n{row['input']}" if row.get("input") else ""
        reply = _text(row["output"], f"{where}'s output")
        return [{"role": "user", "content": asked + extra}, {"role": "assistant", "content": reply}]
    return [
        *as_turns(row["prompt"], "user", f"{where}'s prompt"),
        *as_turns(row["completion"], "assistant", f"{where}'s completion"),
    ]


def as_turns(value: str | list[dict[str, str]], role: str, where: str = "the conversation") -> list[dict[str, str]]:
    """A prompt or reply given as text or as turns (role/content, or ShareGPT's from/value), as messages."""
    if not isinstance(value, list):
        return [{"role": role, "content": _text(value, where)}]
    return [_turn(turn, f"{where}, turn {index}") for index, turn in enumerate(value, 1)]


def _turn(turn: Any, where: str) -> dict[str, str]:
    """One turn; a key set to null counts as absent (datasets gives every turn of a file every key it saw)."""
    keys = {key for key, value in turn.items() if value is not None} if isinstance(turn, dict) else set()
    for role_key, content_key in TURN_KEYS:
        if role_key in keys and content_key in turn:
            role = SHAREGPT_ROLES.get(turn[role_key], turn[role_key])
            return {"role": role, "content": _text(turn[content_key], f"{where} ({role})")}
    found = ", ".join(sorted(map(str, keys))) if isinstance(turn, dict) else type(turn).__name__
    wanted = " or ".join(" + ".join(keys) for keys in TURN_KEYS)
    raise FormatError(f"{where} has the keys {found or 'none'}; a turn needs {wanted}")


def json_kind(value: Any) -> str:
    """A JSON value's type as a message names it: `a number`, `a string`, `an object`, ... (not Python's `a int`)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true or false"
    if isinstance(value, int | float):
        return "a number"
    return {str: "a string", list: "a list", dict: "an object"}.get(type(value), f"a {type(value).__name__}")


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        found = "empty" if isinstance(value, str) else json_kind(value)
        raise FormatError(f"{where} is {found}; it must be a non-empty text")
    return value


def template_syntax_error(template: str) -> str | None:
    """Why a Jinja chat template does not compile as transformers compiles it (its `{% generation %}` tag and loop
    controls known; a filter Jinja and transformers lack, as `| shout`, fails here, not in the job), or None;
    jinja2 is light and comes with transformers."""
    import jinja2
    import jinja2.ext
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class Generation(jinja2.ext.Extension):
        tags = {"generation"}  # noqa: RUF012 (jinja2 declares it so)

        def parse(self, parser):
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            return jinja2.nodes.Scope(body).set_lineno(lineno)

    environment = ImmutableSandboxedEnvironment(extensions=[Generation, jinja2.ext.loopcontrols])
    try:
        environment.compile(template)
    except jinja2.TemplateSyntaxError as exc:  # and its TemplateAssertionError: an unknown filter or test
        return f"line {exc.lineno}: {(exc.message or '').rstrip('.')}"
    return None


def template_owner(spec) -> str:
    """Whose chat template a sentence means: the spec's (`dataset.chat_template`) or the model's own."""
    return "dataset.chat_template" if spec.dataset.chat_template else f"the template of model '{spec.model_name}'"


def template_source(chat_template: str | None) -> str | None:
    """A spec's dataset.chat_template as Jinja text: a named one's, a template as given, None for the model's."""
    if chat_template is None:
        return None
    return NAMED_TEMPLATES[chat_template][0] if chat_template in NAMED_TEMPLATES else chat_template
