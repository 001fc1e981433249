"""A job's checkpoints: the HF Trainer's `output/checkpoint-N` folders, complete ones only.

A job stopped while checkpointing leaves a folder cut off mid-save, which must not be resumed from:
complete means `trainer_state.json` is an object with `global_step` (the Trainer writes it last) and
the weights are there (one file, every shard of an index, a PEFT adapter, or DeepSpeed's
`global_step*` folder).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

CHECKPOINT_DIR = re.compile(r"^checkpoint-(\d+)$")
STATE_FILE = "trainer_state.json"
#: the Trainer's single-file weights: full model or PEFT adapter, safetensors or pickle
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin", "adapter_model.safetensors", "adapter_model.bin")
#: sharded weights: an index naming each shard file
WEIGHT_INDEXES = ("model.safetensors.index.json", "pytorch_model.bin.index.json")
#: DeepSpeed's own checkpoint folder (ZeRO shards), beside the Trainer's files
DEEPSPEED_DIR = "global_step*"


def checkpoint_step(path: str | Path) -> int | None:
    """The global step a checkpoint folder holds, from its name (None if it is not one)."""
    match = CHECKPOINT_DIR.match(Path(path).name)
    return int(match.group(1)) if match else None


def _read_json(path: Path) -> object:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def has_state(folder: Path) -> bool:
    state = _read_json(folder / STATE_FILE)
    return isinstance(state, dict) and isinstance(state.get("global_step"), int)


def has_weights(folder: Path) -> bool:
    if any((folder / name).is_file() for name in WEIGHT_FILES):
        return True
    if any(path.is_dir() for path in folder.glob(DEEPSPEED_DIR)):
        return True
    for name in WEIGHT_INDEXES:
        index = _read_json(folder / name)
        shards = index.get("weight_map") if isinstance(index, dict) else None
        if (
            isinstance(shards, dict)
            and shards
            and all((folder / str(shard)).is_file() for shard in set(shards.values()))
        ):
            return True
    return False


def is_complete(path: str | Path) -> bool:
    return has_state(Path(path)) and has_weights(Path(path))


def last_checkpoint(output_dir: str | Path) -> Path | None:
    """The complete checkpoint with the highest step under `output_dir`, or None."""
    folder = Path(output_dir)
    if not folder.is_dir():
        return None
    found = [
        (checkpoint_step(path), path)
        for path in folder.iterdir()
        if path.is_dir() and checkpoint_step(path) is not None
    ]
    complete = [(step, path) for step, path in found if is_complete(path)]
    return max(complete)[1] if complete else None
