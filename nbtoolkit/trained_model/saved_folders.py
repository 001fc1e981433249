"""A model folder as the training program saves it: a full model, or an adapter beside its base.

Read without torch: launch, plan and preflight ask what a folder holds before anything loads. An adapter
folder holds `adapter_config.json` (PEFT's), the tokenizer, and `base/`: the base model's config, plus its
weights when they exist nowhere else (a bundled tiny model, a base merged from an earlier adapter at load).
"""

from __future__ import annotations

import json
from pathlib import Path

ADAPTER_CONFIG = "adapter_config.json"
#: beside the adapter in the model directory: the base model's config, and its weights when they exist nowhere else
BASE_DIR = "base"


def is_adapter_folder(path: str | Path) -> bool:
    return (Path(path).expanduser() / ADAPTER_CONFIG).is_file()


def config_folder(path: str | Path) -> Path:
    """Where a saved model's config.json is: the folder, or an adapter's base/."""
    path = Path(path).expanduser()
    return path / BASE_DIR if is_adapter_folder(path) else path


def base_weights(path: str | Path, fallback: str | None = None) -> str:
    """The weights an adapter folder's base loads from: its base/ when saved there, else `fallback` (the run's
    model), else the base PEFT recorded (a hub id, or the folder it was loaded from)."""
    base = Path(path).expanduser() / BASE_DIR
    if any(base.glob("*.safetensors")):
        return str(base)
    if fallback:
        return fallback
    return json.loads((Path(path).expanduser() / ADAPTER_CONFIG).read_text())["base_model_name_or_path"]
