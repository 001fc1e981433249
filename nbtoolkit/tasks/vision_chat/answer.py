"""vision-chat's answer: the trained model's next turn about an input's images (Job.predict, Try it)."""

from __future__ import annotations

from pathlib import Path

from nbtoolkit.train.errors import TrainError
from nbtoolkit.train.inference import MAX_NEW_TOKENS

#: the inputs predict and Try it take, in words (for the one sentence a wrong one gets)
INPUTS = (
    "a text, {'text': ..., 'image': path} (or 'images': [paths]), or a conversation of {'role': ..., 'content': ...} "
    "messages whose content may hold {'type': 'image', 'image': path} parts"
)


def input_messages(item) -> list[dict]:
    """One predict input as a conversation with image parts, each image loaded (a relative path is the caller's)."""
    if isinstance(item, str):
        return [{"role": "user", "content": [{"type": "text", "text": item}]}]
    if isinstance(item, dict) and "role" not in item and isinstance(item.get("text"), str):
        images = item.get("images", [item["image"]] if item.get("image") is not None else [])
        parts = [{"type": "image", "image": image} for image in images if isinstance(images, list)]
        return input_messages([{"role": "user", "content": [*parts, {"type": "text", "text": item["text"]}]}])
    if isinstance(item, list) and item and all(isinstance(m, dict) and {"role", "content"} <= m.keys() for m in item):
        return [{"role": m["role"], "content": [_loaded(part) for part in _parts(m["content"])]} for m in item]
    raise TrainError(f"vision-chat inputs are {INPUTS}; got {str(item)[:80]!r}")


def _parts(content) -> list:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list) and all(
        isinstance(part, dict) and part.get("type") in ("text", "image") for part in content
    ):
        return content
    raise TrainError(f"vision-chat inputs are {INPUTS}; a message's content is {str(content)[:80]!r}")


def _loaded(part: dict) -> dict:
    """An image part with its picture opened (one sentence if the file is missing or no image)."""
    if part["type"] != "image":
        return part
    from PIL import Image, UnidentifiedImageError

    image = part.get("image")
    if not isinstance(image, str):
        raise TrainError(f"an image part's image is {str(image)[:80]!r}; give the image file's path")
    try:
        return {"type": "image", "image": Image.open(Path(image).expanduser()).convert("RGB")}
    except (FileNotFoundError, IsADirectoryError):
        raise TrainError(
            f"the image {image} does not exist (a relative path is from where predict is called)"
        ) from None
    except UnidentifiedImageError:
        raise TrainError(f"the file {image} is no image Pillow can read; give a PNG, JPEG or WebP file") from None


def reply(spec, model, processor, item) -> dict:
    """The assistant's next turn about the input's images, rendered by the processor the job trained and saved with."""
    messages = input_messages(item)
    encoded = processor.apply_chat_template(
        messages, add_generation_prompt=True, tokenize=True, return_dict=True, return_tensors="pt"
    )
    tokenizer = processor.tokenizer
    output = model.generate(
        **encoded,
        max_new_tokens=MAX_NEW_TOKENS,
        do_sample=False,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    prompt = processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    reply = tokenizer.decode(output[0, encoded["input_ids"].shape[1] :], skip_special_tokens=True)
    return {"reply": reply, "prompt": prompt}
