"""vision-chat's data preview: each row through the processor as TRL's collator renders it, its loss tokens marked and
its images beside it (small PNGs inline in the HTML)."""

from __future__ import annotations

import base64
import io

from nbtoolkit.inputs.chat_preview import Rendered, as_rendered
from nbtoolkit.tasks.vision_chat.formats import VISION_COLUMNS, VISION_FORMAT_NAMES, detect_vision_format
from nbtoolkit.train.errors import TrainError

#: the longest side of an image as the preview shows it, in pixels
THUMBNAIL = 96


def preview_sample(spec, sample) -> tuple[str, list[str], list[Rendered], None]:
    """The format in words, the columns read, and every row rendered as trained."""
    from trl.data_utils import prepare_multimodal_messages

    from nbtoolkit.inputs.chat_formats import FormatError
    from nbtoolkit.inputs.data_preview import quiet_progress
    from nbtoolkit.tasks.vision_chat.formats import load_processor
    from nbtoolkit.tasks.vision_chat.train import conversations

    try:
        fmt = detect_vision_format(sample.column_names, spec.dataset.format)
    except FormatError as exc:
        raise TrainError(str(exc)) from None
    processor = load_processor(spec.model_name)
    rendered = []
    with quiet_progress():
        rows = conversations(spec, sample, "train", say=False)
    for row in rows:
        # the call DataCollatorForVisionLanguageModeling makes (trl/trainer/sft_trainer.py:386-401)
        encoded = processor.apply_chat_template(
            prepare_multimodal_messages(row["messages"], images=row["images"]),
            tokenize=True,
            return_dict=True,
            return_assistant_tokens_mask=True,
        )
        ids = list(encoded["input_ids"][0])
        mask = list(encoded["assistant_masks"][0])
        rendered.append(as_rendered(processor.tokenizer, ids, mask, tuple(map(thumbnail, row["images"]))))
    return f"{fmt}, {VISION_FORMAT_NAMES[fmt]}", list(VISION_COLUMNS[fmt]), rendered, None


def thumbnail(image) -> str:
    """A PIL image as a base64 PNG no larger than THUMBNAIL pixels a side."""
    copy = image.convert("RGB")
    copy.thumbnail((THUMBNAIL, THUMBNAIL))
    buffer = io.BytesIO()
    copy.save(buffer, format="PNG")
    return base64.b64encode(buffer.getvalue()).decode("ascii")
