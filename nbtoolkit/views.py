"""Views the core shows itself through without importing them.

A job's chart, its notebook display and a data preview's HTML are notebook views; the core asks
for them by name here, and the package root (`nbtoolkit/__init__.py`, where the notebook entry
points live) provides them. So the core never imports a view, and another front end could
provide its own.
"""

from __future__ import annotations

from collections.abc import Callable

_provided: dict[str, Callable[..., object]] = {}


def provide(name: str, view: Callable[..., object]) -> None:
    _provided[name] = view


def view(name: str) -> Callable[..., object]:
    if name not in _provided:
        raise LookupError(f"no '{name}' view is provided; import nbtoolkit (its notebook views) before showing one")
    return _provided[name]
