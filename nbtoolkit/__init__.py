"""nbtoolkit: describe, check, launch and watch Hugging Face fine-tuning runs from a notebook.

This module stays light: importing it (or `%load_ext nbtoolkit`) loads no torch,
transformers, deepspeed or sagemaker. Heavy imports happen inside the training process.
"""

from __future__ import annotations

__version__ = "0.1.0"


def load_ipython_extension(ipython) -> None:
    """`%load_ext nbtoolkit`: register the magics (light: no torch)."""
    from nbtoolkit.notebook.magics import register

    register(ipython)


def _jupyter_labextension_paths() -> list[dict[str, str]]:
    """Where the built job panel is (`jupyter labextension develop .` links it into Lab)."""
    return [{"src": "labextension", "dest": "nbtoolkit"}]
