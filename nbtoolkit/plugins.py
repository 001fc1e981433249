"""The installed distributions' entry points, read once per process for the backend and task registries.

Reading them opens every distribution's metadata: about 150 ms with this project's ~250 packages (measured with
`python -X importtime -c "import nbtoolkit.tasks"`, 2-core machine), paid once here instead of once per registry.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from functools import cache
from importlib.metadata import EntryPoint, EntryPoints, entry_points
from typing import Any


@cache
def _every_entry_point() -> EntryPoints:
    return entry_points()


def registered_in(group: str) -> EntryPoints:
    """The entry points of a group, in the order the distributions are found on sys.path."""
    return _every_entry_point().select(group=group)


def loaded(group: str, kind: type, what: str) -> Iterator[tuple[EntryPoint, Any]]:
    """Each entry point of the group that loads an instance of `kind` named as the entry point, nbtoolkit's own
    first; one that fails to load, is something else, or takes a name already taken (so a plugin cannot replace one
    of nbtoolkit's) is named in a warning and left out, so one broken plugin cannot break every spec. `what`: the
    kind in words ("task", "backend")."""
    taken: dict[str, str] = {}
    for entry in sorted(registered_in(group), key=lambda entry: not entry.value.startswith("nbtoolkit.")):
        try:
            found = entry.load()
        except Exception as exc:
            warnings.warn(
                f"{what} '{entry.name}' ({entry.value}) could not be loaded and is left out: {exc}", stacklevel=3
            )
            continue
        if not isinstance(found, kind) or getattr(found, "name", None) != entry.name:
            warnings.warn(
                f"the entry point '{entry.name}' in {group} ({entry.value}) is not a nbtoolkit {kind.__name__} named "
                f"'{entry.name}' and is left out",
                stacklevel=3,
            )
            continue
        if entry.name in taken:
            warnings.warn(
                f"{what} '{entry.name}' ({entry.value}) is left out: {taken[entry.name]} registers a {what} of that "
                "name already; rename one of them",
                stacklevel=3,
            )
            continue
        taken[entry.name] = entry.value
        yield entry, found
