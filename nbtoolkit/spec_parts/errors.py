"""The two ways a spec can fail a user: an error that stops it, a warning that lets it run.

Apart from the spec so that what reads a spec's text (nbtoolkit.spec_parts.yaml_reading) raises the same error the
spec's rules do, without importing the spec.
"""

from __future__ import annotations


class SpecError(ValueError):
    """A spec that cannot run; its message is the one sentence a user reads."""


class SpecWarning(UserWarning):
    """A spec that runs but probably not as the user hopes (e.g. fp16 overflow in T5)."""
