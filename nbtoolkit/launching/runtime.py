"""The runtime contract between a launch and the program it starts: file names and how errors are said.

Backends write these files and the training program reads them, so both import them from here,
not from each other: the training program knows no backend, a backend knows no trainer internals.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

#: the full spec, written into the job folder; `python -m nbtoolkit.train --spec spec.json` reads it
SPEC_FILE = "spec.json"
#: the DeepSpeed config a DeepSpeed launch writes beside it, handed to TrainingArguments(deepspeed=...)
DEEPSPEED_CONFIG_FILE = "ds_config.json"
#: a program that fails for a reason it can explain prints this, then one sentence (the job's message)
ERROR_PREFIX = "[nbtoolkit] error:"


#: prctl(2)'s option for the signal a process gets when the thread that started it ends (Linux)
PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """SIGKILL this process when its parent ends (Linux; elsewhere nothing), and end it now if the parent already
    has (reparented to init before this ran). A job's ranks must not outlive a supervisor, watcher and launcher
    killed together (`pkill -9 -f JOB_ID`): no one would be left to end them. Run at the start of every
    interpreter a job starts (autolog's sitecustomize, nbtoolkit.train) and, as a Popen preexec_fn from a thread
    that lives as long as the parent, in a stage's first process."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() == 1:
        os.kill(os.getpid(), signal.SIGKILL)


def default_home() -> Path:
    """Where jobs and caches live: $NBTOOLKIT_HOME, else the per-user data directory."""
    if os.environ.get("NBTOOLKIT_HOME"):
        return Path(os.environ["NBTOOLKIT_HOME"]).expanduser()
    import platformdirs

    return Path(platformdirs.user_data_dir("nbtoolkit", appauthor=False))
