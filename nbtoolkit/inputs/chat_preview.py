"""The data preview of chat, preference and grpo runs: rows rendered through the run's chat template,
token by token as the trainer sees them, with the tokens that carry loss marked.

Uses the training program's own tokenizer set-up (nbtoolkit.train.chat_template) and the same
`apply_chat_template(..., return_assistant_tokens_mask=True)` call TRL's SFT trainer makes, so what is
shown is what is trained; heavy libraries load inside `chat_sample` only.
"""

from __future__ import annotations

from dataclasses import dataclass

from nbtoolkit.inputs.chat_formats import (
    FORMAT_COLUMNS,
    FormatError,
    as_messages,
    as_turns,
    assistant_only_loss,
    detect_format,
    template_owner,
)
from nbtoolkit.spec import RunSpec
from nbtoolkit.tasks import TASKS
from nbtoolkit.train.errors import TrainError


@dataclass(frozen=True)
class Rendered:
    """One example as the model reads it: (text, carries loss) pieces in order, its token count, and the tokens
    before the first that carries loss (all of them when none does): what a `max_length` cut must keep past."""

    pieces: list[tuple[str, bool]]
    tokens: int
    prompt_tokens: int
    loss_ids: frozenset[int] = frozenset()  # the token ids that carry loss
    images: tuple[str, ...] = ()  # the row's images as base64 PNG thumbnails (a vision-language task's)

    def marked(self) -> str:
        """The text with the loss-carrying pieces in [[ ]] (the CLI's view)."""
        return "".join(f"[[{text}]]" if loss else text for text, loss in self.pieces)


def data_format(spec: RunSpec, columns: list[str]) -> str:
    """The detected chat format (chat), or the columns a preference/grpo run reads, checked."""
    if TASKS[spec.task].conversations:
        try:
            return detect_format(columns, spec.dataset.format)
        except FormatError as exc:
            raise TrainError(str(exc)) from None
    wanted = TASKS[spec.task].row_columns
    missing = [column for column in wanted if column not in columns]
    if missing:
        raise TrainError(
            f"{spec.task} data needs the column(s) {', '.join(wanted)}; this data lacks {', '.join(missing)} "
            f"(it has {', '.join(columns)})"
        )
    return "/".join(wanted)


def read_columns(task: str, fmt: str) -> list[str]:
    """The columns a run reads: its chat format's (chat), or the task's (preference, grpo)."""
    return list(FORMAT_COLUMNS[fmt] if TASKS[task].conversations else TASKS[task].row_columns)


def chat_sample(spec: RunSpec, sample) -> tuple[str, list[Rendered], str | None]:
    """The sample's format, every row rendered through the run's template (first rows first), and the warning
    when the template's end of turn carries loss in none of them."""
    from nbtoolkit.train.chat_template import chat_tokenizer, loss_template

    fmt = data_format(spec, list(sample.column_names))
    tokenizer = chat_tokenizer(spec)
    template = loss_template(spec, tokenizer)  # the trainer's masking template, or its sentence why there is none
    every_token = TASKS[spec.task].conversations and not assistant_only_loss(spec.task, spec.extra)
    rendered = [
        render_row(spec, tokenizer, spec.task, fmt, row, number, template, every_token)
        for number, row in enumerate(sample, 1)
    ]
    return fmt, rendered, untrained_end_of_turn(spec, tokenizer, rendered)


def untrained_end_of_turn(spec: RunSpec, tokenizer, rendered: list[Rendered]) -> str | None:
    """The sentence for a chat run whose end-of-turn token carries loss in no row: a template that closes the
    assistant's turn outside its `{% generation %}` markers, so the model never learns to stop (Axolotl #3754).
    Chat only: TRL's preference trainers train the whole chosen completion, its end of turn included."""
    end = tokenizer.eos_token_id
    if not TASKS[spec.task].conversations or end is None or any(end in example.loss_ids for example in rendered):
        return None
    return (
        f"the end-of-turn token {tokenizer.eos_token} carries loss in none of the {len(rendered)} rows read "
        f"({template_owner(spec)} closes the assistant's turn outside its {{% generation %}} markers), so the "
        "model does not learn to stop; put the end-of-turn token inside the markers, or stop generation yourself"
    )


def render_row(
    spec: RunSpec, tokenizer, task: str, fmt: str, row: dict, number: int, template, every_token
) -> Rendered:
    """`render`, with a row the data format or the template cannot render said in one sentence (TrainError)."""
    try:
        return render(tokenizer, task, fmt, row, number, template, every_token)
    except FormatError as exc:
        raise TrainError(f"the {spec.dataset.train_split} split: {exc}") from None
    except Exception as exc:  # what compiles can still fail on a row: raise_exception, `content / 2`, an undefined
        raise TrainError(
            f"the chat template ({template_owner(spec)}) fails on row {number} of the {spec.dataset.train_split} split: "
            f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}; fix the template or the row"
        ) from None


def render(tokenizer, task: str, fmt: str, row: dict, number: int, template: str | None, every_token: bool) -> Rendered:
    """One row's tokens and which carry loss: the masking template's marks, or all of them (every_token)."""
    if TASKS[task].conversations:
        messages, prompt_only = as_messages(row, fmt, number), False
    elif "chosen" in TASKS[task].row_columns:  # preference, reward-model: the chosen reply is what is pulled toward
        prompt = as_turns(row["prompt"], "user", f"row {number}'s prompt")
        messages, prompt_only = prompt + as_turns(row["chosen"], "assistant", f"row {number}'s chosen"), False
    else:  # grpo: the prompt the completions continue; no token of it carries loss
        messages, prompt_only = as_turns(row["prompt"], "user", f"row {number}'s prompt"), True
    encoded = tokenizer.apply_chat_template(
        messages,
        tokenize=True,
        return_dict=True,
        return_assistant_tokens_mask=not (prompt_only or every_token),
        add_generation_prompt=prompt_only,
        chat_template=template,
    )
    ids = list(encoded["input_ids"])
    mask = [1] * len(ids) if every_token else list(encoded.get("assistant_masks") or [0] * len(ids))
    return as_rendered(tokenizer, ids, mask)


def as_rendered(tokenizer, ids: list[int], mask: list[int], images: tuple[str, ...] = ()) -> Rendered:
    """Token ids and their loss mask as pieces of text that carry loss or not."""
    pieces: list[tuple[str, bool]] = []
    start = 0
    for end in range(1, len(ids) + 1):
        if end == len(ids) or mask[end] != mask[start]:
            pieces.append((tokenizer.decode(ids[start:end]), bool(mask[start])))
            start = end
    loss_ids = frozenset(token for token, loss in zip(ids, mask, strict=True) if loss)
    return Rendered(pieces, len(ids), mask.index(1) if 1 in mask else len(ids), loss_ids, images)
