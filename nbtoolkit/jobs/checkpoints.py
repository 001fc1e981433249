"""A job's checkpoints: the HF Trainer's `output/checkpoint-N` folders, complete ones only.

The Trainer writes `trainer_state.json` last, so a folder without a readable one was cut off
mid-save (a job stopped while checkpointing) and must not be resumed from.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

CHECKPOINT_DIR = re.compile(r"^checkpoint-(\d+)$")
STATE_FILE = "trainer_state.json"


def checkpoint_step(path: str | Path) -> int | None:
    """The global step a checkpoint folder holds, from its name (None if it is not one)."""
    match = CHECKPOINT_DIR.match(Path(path).name)
    return int(match.group(1)) if match else None


def is_complete(path: str | Path) -> bool:
    try:
        json.loads((Path(path) / STATE_FILE).read_text())
    except (OSError, ValueError):
        return False
    return True


def last_checkpoint(output_dir: str | Path) -> Path | None:
    """The complete checkpoint with the highest step under `output_dir`, or None."""
    folder = Path(output_dir)
    if not folder.is_dir():
        return None
    found = [(checkpoint_step(path), path) for path in folder.iterdir() if path.is_dir() and checkpoint_step(path) is not None]
    complete = [(step, path) for step, path in found if is_complete(path)]
    return max(complete)[1] if complete else None
