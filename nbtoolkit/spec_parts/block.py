"""The base of every block of a spec, the core's (dataset, hardware, ...) and a backend's (sagemaker, neuron, ...).

Light on purpose: a backend's block module imports only this, so the spec can gather the blocks of
every registered backend while it is itself being imported.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class SpecBlock(BaseModel):
    """Unknown fields are refused (a typo fails with the field's name); assignments are validated; a number field
    refuses NaN and infinity (no bound holds for them, and spec.json would keep them as null)."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)
