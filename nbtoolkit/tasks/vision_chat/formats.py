"""Vision-language chat data: detect its format, turn its rows into TRL's (`messages` with image parts + `images`).

Two formats, named as nbtoolkit.inputs.chat_formats names their text-only kin:
- `messages`: TRL's vision format (trl/trainer/sft_trainer.py:262-279, DataCollatorForVisionLanguageModeling):
  turns whose content is text or a list of parts (`{"type": "image"}`, `{"type": "text", "text": ...}`), and an
  `images` column holding one path (or list of paths) per row, in the order the image parts come;
- `sharegpt`: LLaVA's JSON (LLaVA-Instruct-150K): `conversations` of `from: human/gpt` turns with `<image>` in the
  text where the picture goes, and an `image` column holding one path.
Image paths are relative to the data file's folder (or absolute). Light (no PIL, no datasets): the spec's data check,
the preview and the training program share it.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from nbtoolkit.inputs.chat_formats import SHAREGPT_ROLES, FormatError, detect_format, json_kind

#: format -> (the turns' column, the images' column), checked in this order
VISION_COLUMNS: dict[str, tuple[str, ...]] = {
    "messages": ("messages", "images"),
    "sharegpt": ("conversations", "image"),
}
#: what each format is, in the words the job's log and the preview say
VISION_FORMAT_NAMES = {
    "messages": "messages with image parts and an images column (TRL's format)",
    "sharegpt": "sharegpt conversations with <image> and an image column (LLaVA's format)",
}
#: where LLaVA's text puts the picture
LLAVA_IMAGE = "<image>"

#: ChatML with image parts: what the bundled tiny vision model's processor renders. An image part becomes
#: Gemma 3's begin-of-image token, which its processor expands to the image's soft tokens
#: (transformers/models/gemma3/processing_gemma3.py:45-49); TRL's `{% generation %}` markers wrap the replies.
CHATML_VISION = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' }}"
    "{%- if message['content'] is string %}{%- set parts = [{'type': 'text', 'text': message['content']}] %}"
    "{%- else %}{%- set parts = message['content'] %}{%- endif %}"
    "{%- if message['role'] == 'assistant' %}"
    "{% generation %}{%- for part in parts %}{%- if part['type'] == 'text' %}{{- part['text'] }}{%- endif %}"
    "{%- endfor %}{{- '<|im_end|>' }}{% endgeneration %}{{- '\\n' }}"
    "{%- else %}{%- for part in parts %}"
    "{%- if part['type'] == 'image' %}{{- '<start_of_image>' }}"
    "{%- elif part['type'] == 'text' %}{{- part['text'] }}{%- endif %}"
    "{%- endfor %}{{- '<|im_end|>\\n' }}{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)


def load_processor(name: str):
    """The model's processor (image processor, tokenizer, chat template): a bundled tiny model's from its folder
    (transformers imported here, not with TRL's trainer: the pre-launch check loads it)."""
    from transformers import AutoProcessor

    from nbtoolkit.inputs.bundled import is_bundled, tokenizer_dir
    from nbtoolkit.train.models import model_source

    return AutoProcessor.from_pretrained(tokenizer_dir(name) if is_bundled(name) else model_source(name))


def detect_vision_format(columns: Iterable[str], declared: str = "auto") -> str:
    """The vision format of rows with these columns: the declared one (checked), or with auto the first that fits."""
    return detect_format(columns, declared, VISION_COLUMNS, "vision chat")


def as_vision_row(row: dict[str, Any], fmt: str, folder: Path | None, number: int | None = None) -> dict[str, Any]:
    """One row as TRL's: `messages` (every content a list of text and image parts) and `images` (paths made
    absolute against `folder`, the data file's; images a hub dataset decoded are kept as they are)."""
    where = f"row {number}" if number is not None else "a row"
    turns_column, images_column = VISION_COLUMNS[fmt]
    turns = row[turns_column]
    if not isinstance(turns, list) or not turns:
        raise FormatError(f"{where}'s {turns_column} is {json_kind(turns)}; it must be a list of turns")
    images = row[images_column]
    images = [] if images is None else images if isinstance(images, list) else [images]
    messages = [_turn(turn, f"{where}'s {turns_column}, turn {index}") for index, turn in enumerate(turns, 1)]
    parts = sum(part["type"] == "image" for message in messages for part in message["content"])
    if parts == 0 and images:  # TRL's rule (trl/data_utils.py:52-55): the images go before the first user turn
        first_user = next((message for message in messages if message["role"] == "user"), messages[0])
        first_user["content"] = [{"type": "image", "text": None} for _ in images] + first_user["content"]
    elif parts != len(images):
        raise FormatError(
            f"{where} has {parts} image place(s) in its turns but {len(images)} image(s) in its {images_column} "
            "column; give one image per place"
        )
    return {"messages": messages, "images": [_image(image, folder, where) for image in images]}


def _turn(turn: Any, where: str) -> dict[str, Any]:
    """A role/content or from/value turn, its content as parts (images in the user's turns alone)."""
    if not isinstance(turn, dict):
        raise FormatError(f"{where} is {json_kind(turn)}; a turn needs role + content or from + value")
    role_key, content_key = ("role", "content") if "role" in turn else ("from", "value")
    if role_key not in turn or content_key not in turn:
        raise FormatError(
            f"{where} has the keys {', '.join(sorted(turn)) or 'none'}; a turn needs role + content or from + value"
        )
    role = SHAREGPT_ROLES.get(turn[role_key], turn[role_key])
    content = turn[content_key]
    parts = _parts(content, where, content_key)
    if role == "assistant" and any(part["type"] == "image" for part in parts):
        # the processor renders an assistant's text alone: its image would be one image too many at step 1
        raise FormatError(f"{where} is the assistant's and holds an image; put images in the user's turns")
    return {"role": role, "content": parts}


def _parts(content: Any, where: str, content_key: str) -> list[dict[str, Any]]:
    """A turn's content as parts; LLaVA's `<image>` splits the text around a picture."""
    if isinstance(content, str):
        pieces = content.split(LLAVA_IMAGE)
        parts = [{"type": "text", "text": piece.strip("\n")} for piece in pieces]
        for index in range(len(pieces) - 1, 0, -1):
            parts.insert(index, {"type": "image", "text": None})
        return [part for part in parts if part["type"] == "image" or part["text"]]
    if not isinstance(content, list) or not content:
        raise FormatError(f"{where}'s {content_key} is {json_kind(content)}; it must be a text or a list of parts")
    return [_part(part, f"{where}, part {index}") for index, part in enumerate(content, 1)]


def _part(part: Any, where: str) -> dict[str, Any]:
    kind = part.get("type") if isinstance(part, dict) else None
    if kind == "image":
        return {"type": "image", "text": None}
    if kind == "text" and isinstance(part.get("text"), str):
        return {"type": "text", "text": part["text"]}
    raise FormatError(f"{where} is {part!r}; a part is {{type: image}} or {{type: text, text: ...}}")


def _image(image: Any, folder: Path | None, where: str) -> Any:
    if not isinstance(image, str):
        return image  # a hub dataset's decoded image
    if not image.strip():
        raise FormatError(f"{where} names an empty image path; give the image's path relative to the data file")
    path = Path(image).expanduser()
    return str(path if path.is_absolute() or folder is None else folder / path)


def check_row(row: dict[str, Any], number: int, dataset, where: str, folder: Path) -> list[str]:
    """A row of a local data file as the job will read it (vision-chat's `check_row`; the row holds every column of
    the file, as `datasets` reads it): in the file's vision format, the one the job picks for every row (the first
    of VISION_COLUMNS the file has a column for), its image places matching its images; returns the image files it
    names (the pre-launch check opens each)."""
    from nbtoolkit.inputs.data_files import DataError

    declared = dataset.format
    fmt = (
        declared
        if declared != "auto"
        else next((name for name, (turns, _) in VISION_COLUMNS.items() if turns in row), None)
    )
    other = next((name for name, (turns, _) in VISION_COLUMNS.items() if row.get(turns) is not None), None)
    if fmt is not None and row.get(VISION_COLUMNS[fmt][0]) is None and other is not None:
        raise DataError(
            f"{where}: row {number} is in the {other} format but the file is read in the {fmt} format (the job "
            f"reads every row of a file in one format: the first of {', '.join(VISION_COLUMNS)} it has a column "
            "for); give every row in one format, or split the file"
        )
    try:
        fmt = fmt or detect_vision_format(row)  # its sentence: the row is in no vision format
        images_column = VISION_COLUMNS[fmt][1]
        read = as_vision_row({images_column: None, **row}, fmt, folder, number)  # a text-only row may omit images
    except (FormatError, KeyError) as exc:
        problem = exc.args[0] if isinstance(exc, FormatError) else f"row {number} has no {exc.args[0]} column"
        raise DataError(f"{where}: {problem}") from None
    return [image for image in read["images"] if isinstance(image, str)]
