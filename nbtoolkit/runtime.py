"""The runtime contract between a launch and the program it starts: file names and how errors are said.

Backends write these files and the training program reads them, so both import them from here,
not from each other: the training program knows no backend, a backend knows no trainer internals.
"""

from __future__ import annotations

import os
from pathlib import Path

#: the full spec, written into the job folder; `python -m nbtoolkit.train --spec spec.json` reads it
SPEC_FILE = "spec.json"
#: the DeepSpeed config a DeepSpeed launch writes beside it, handed to TrainingArguments(deepspeed=...)
DEEPSPEED_CONFIG_FILE = "ds_config.json"
#: a program that fails for a reason it can explain prints this, then one sentence (the job's message)
ERROR_PREFIX = "[nbtoolkit] error:"


def default_home() -> Path:
    """Where jobs and caches live: $NBTOOLKIT_HOME, else the per-user data directory."""
    if os.environ.get("NBTOOLKIT_HOME"):
        return Path(os.environ["NBTOOLKIT_HOME"]).expanduser()
    import platformdirs

    return Path(platformdirs.user_data_dir("nbtoolkit", appauthor=False))
