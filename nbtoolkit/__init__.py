"""nbtoolkit: describe, check, launch and watch Hugging Face fine-tuning runs from a notebook.

This module stays light: importing it (or `%load_ext nbtoolkit`) loads no torch,
transformers, deepspeed or sagemaker. Heavy imports happen inside the training process.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"


def load_ipython_extension(ipython) -> None:
    """`%load_ext nbtoolkit`: register the magics (light: no torch)."""
    from nbtoolkit.notebook.magics import register

    register(ipython)


def _jupyter_labextension_paths() -> list[dict[str, str]]:
    """Where the built job panel is (`jupyter labextension develop .` links it into Lab)."""
    return [{"src": "labextension", "dest": "nbtoolkit"}]


def __getattr__(name: str):
    """`nbtoolkit.launch(spec)`, `nbtoolkit.plan(spec)` (at the pace of past jobs of its setup), `nbtoolkit.Job` and `nbtoolkit.log(step=..., loss=...)` (a custom loop's
    metrics), imported on first use so `import nbtoolkit` stays light.

    `nbtoolkit.jobs()` is the `nbtoolkit.jobs` package itself, which is callable (see there).
    """
    if name in ("launch", "plan", "Job"):
        from nbtoolkit import api

        return getattr(api, name)
    if name == "log":
        from nbtoolkit.report import log

        return log
    if name == "jobs":
        return importlib.import_module("nbtoolkit.jobs")
    raise AttributeError(f"module 'nbtoolkit' has no attribute {name!r}")
