"""vision-chat's pre-launch length check (its `check_lengths`): `dataset.max_length` against the image tokens.

TRL cuts each rendered row at `max_length` (SFTConfig.max_length, which nbtoolkit sets from the spec: 128 unless
given; TRL's own default is 1024, trl/trainer/sft_config.py:202) and an image becomes many tokens (Gemma 3: 256,
its mm_tokens_per_image). A cut through a row's image tokens failed the job at step 1 ("Mismatch in image token
count"); a cut before every reply trained nothing and succeeded with a loss of 0. Both are found here: the first
refused, the second as chat's (nbtoolkit.inputs.preflight.CutReplies: refused when every row goes, else warned).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from nbtoolkit.inputs.chat_formats import FormatError

#: what a failed cut through the image tokens does to the job, and what to do
IMAGE_CUT = "which fails the job at its first step (the model counts fewer image tokens than images)"


def check_lengths(spec, check_rows: bool):
    """(the cut through image tokens that fails the job, in one sentence, or None; the rows that lose every reply,
    or None). Without rows to read (a hub dataset, another machine's files), the planner's tokens per image from the
    model's config: a `max_length` that cannot hold one image."""
    from nbtoolkit.inputs.bundled import bundled_files
    from nbtoolkit.inputs.preflight import runs_here

    limit = spec.dataset.max_length
    per_image = image_tokens(spec.model_name)
    if per_image and limit <= per_image:
        return (
            f"dataset.max_length {limit} cannot hold one image: model {spec.model_name} turns each image into "
            f"{per_image} tokens, {IMAGE_CUT}; raise dataset.max_length well above {per_image}"
        ), None
    files = {} if spec.dataset.name else spec.dataset.files or bundled_files(spec.task)
    split = spec.dataset.train_split
    if not check_rows or not runs_here(spec) or split not in files or Path(files[split]).suffix == ".parquet":
        return None, None
    path = Path(files[split]).expanduser()
    status = path.stat()
    where = f"dataset.files.{split} ({files[split]})"
    return rendered_cuts(
        str(path), status.st_mtime_ns, status.st_size, where, spec.model_name, limit, spec.dataset.format
    )


def image_tokens(model: str) -> int:
    """The tokens the model turns an image into, from its config (nbtoolkit.planner.shapes); 0 when unknown."""
    from nbtoolkit.planner.shapes import model_shape

    try:
        return model_shape(model).image_tokens
    except Exception:  # a config the planner cannot read or size: the rows' rendering still checks
        return 0


@lru_cache(maxsize=16)
def rendered_cuts(name: str, _mtime_ns: int, _size: int, where: str, model: str, limit: int, declared: str):
    """The file's first rows rendered as TRL's collator renders them (the processor's template, the images
    expanded to their tokens: trl/trainer/sft_trainer.py:386-401), measured against `limit`. The images are
    decoded (a processor may size its tokens by the picture): 200 rows of 448 px PNGs took 4.5 s here, so the
    verdict is kept while the data file is unchanged."""
    from PIL import Image
    from trl.data_utils import prepare_multimodal_messages

    from nbtoolkit.inputs.data_files import file_columns, folder, rows
    from nbtoolkit.inputs.preflight import LENGTH_ROWS, replies_cut
    from nbtoolkit.tasks.vision_chat.formats import as_vision_row, detect_vision_format, load_processor

    path = Path(name)
    processor = load_processor(model)
    # the ids the model counts as image tokens (transformers/processing_utils.py:1040, ProcessorMixin.image_token_ids)
    image_ids = set(processor.image_token_ids)
    numbered, columns = file_columns(rows(path, where))
    prompts = []
    for number, row in numbered[:LENGTH_ROWS]:
        try:
            fmt = detect_vision_format(columns, declared)  # as the job picks it (train.conversations)
            read = as_vision_row({**columns, **row}, fmt, folder(path), number)
        except FormatError:  # the data check said so
            return None, None
        images = [Image.open(image) if isinstance(image, str) else image for image in read["images"]]
        encoded = processor.apply_chat_template(
            prepare_multimodal_messages(read["messages"], images=images),
            tokenize=True,
            return_dict=True,
            return_assistant_tokens_mask=True,
        )
        for image in images:
            image.close()
        ids, mask = list(encoded["input_ids"][0]), list(encoded["assistant_masks"][0])
        image_end = max((index + 1 for index, token in enumerate(ids) if token in image_ids), default=0)
        if image_end > limit:
            return (
                f"dataset.max_length {limit} cuts through the image tokens of row {number} of {where} (its images "
                f"end at token {image_end}), {IMAGE_CUT}; raise dataset.max_length above {image_end}"
            ), None
        prompts.append(mask.index(1) if 1 in mask else len(ids))
    # TRL's vision collator keeps such a row (it skips preparing the dataset: sft_trainer.py:1005-1010): no loss
    return None, replies_cut(where, len(numbered), prompts, limit, dropped=False)
