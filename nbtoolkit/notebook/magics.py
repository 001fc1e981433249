"""What `%load_ext nbtoolkit` registers: every Magics class of the notebook front.

Each entry names a module and a class, imported only when the extension loads.
"""

from __future__ import annotations

import importlib

#: module -> IPython Magics class registered by `%load_ext nbtoolkit`
MAGIC_CLASSES: dict[str, str] = {
    "nbtoolkit.notebook.capture": "CaptureMagics",
}


def register(ipython) -> None:
    for module, name in MAGIC_CLASSES.items():
        ipython.register_magics(getattr(importlib.import_module(module), name))
