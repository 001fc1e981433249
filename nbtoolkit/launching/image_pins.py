"""Which image lock a run's container meets, and the versions its requirements.txt pins there: exactly those its
rehearsal ran with (`nbtoolkit rehearse SPEC --image-env`, nbtoolkit.rehearsal.image_envs).

A requirements.txt line such as `datasets>=4.7.0` lets the container's pip take the newest release that fits on the
day the job runs (over the 5.3.0 image a reviewer's pip took datasets 5.2.0 and huggingface-hub 1.33.0 where the
rehearsal's lock holds 5.0.1 and 1.10.0). So for each image lock (requirements-image-NAME.lock), `make lock` writes
into image_pins.json beside this module the packages of the image's fact table (tests/facts/images/NAME.json) that
the lock holds at another version than the image's own (what the container's pip lifts), with the lock's version;
the container's requirements.txt pins those (`==`). Shipped with the package: the tables and locks are not.
"""

from __future__ import annotations

import json
import re
import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Protocol, TypeVar

from nbtoolkit.spec_parts.errors import SpecWarning
from nbtoolkit.train.supported_versions import FLOOR

PINS = Path(__file__).with_name("image_pins.json")
#: a Hugging Face image tag's transformers version (`...:2.9.0-transformers5.3.0-gpu-...`)
TAG_TRANSFORMERS = re.compile(r"-transformers([\d.]+)-")
#: nbtoolkit's extras whose requirements.txt lines can lift an image's packages (PEFT for an adapter, TRL for chat)
LIFTING_EXTRAS = tuple(sorted({floor.extra for floor in FLOOR if floor.extra}))


class Locked(Protocol):
    """What picking an image's lock reads: an image lock here, or its fact table (nbtoolkit.rehearsal.image_envs.ImageStack)."""

    @property
    def image(self) -> str: ...
    @property
    def extras(self) -> tuple[str, ...]: ...
    @property
    def task_requires(self) -> tuple[str, ...]: ...


L = TypeVar("L", bound=Locked)


@dataclass(frozen=True)
class LockedImage:
    """One image lock: the image, the requirements.txt it was locked with (extras, the task's own lines), and the
    versions that requirements.txt pins in that image."""

    name: str
    image: str
    extras: tuple[str, ...]
    task_requires: tuple[str, ...]
    pins: dict[str, str]


@cache
def locked_images() -> dict[str, LockedImage]:
    """Every image lock, by name (image_pins.json, written by `make lock`)."""
    return {
        name: LockedImage(
            name=name,
            image=entry["image"],
            extras=tuple(entry["extras"]),
            task_requires=tuple(entry["task_requires"]),
            pins=entry["pins"],
        )
        for name, entry in json.loads(PINS.read_text()).items()
    }


def of_image(image: str, task_requires: tuple[str, ...], among: Iterable[L]) -> list[L]:
    """The locks of one GPU image (the same Hugging Face release: its tag's transformers version) made with a task's
    own requirements.txt lines."""
    tag = TAG_TRANSFORMERS.search(image)
    if tag is None:
        return []
    return [
        locked
        for locked in among
        if f"-transformers{tag[1]}-" in locked.image
        and "neuronx" not in locked.image
        and locked.task_requires == task_requires
    ]


def not_locked_for(candidates: list[L], extras: tuple[str, ...]) -> list[str]:
    """The lifting extras of a run that no lock of its image was made with ([]: one was, or the image has none)."""
    if not candidates:
        return []
    widest = max(candidates, key=lambda locked: len(locked.extras))
    return sorted((set(LIFTING_EXTRAS) & set(extras)) - set(widest.extras))


def fitting(candidates: list[L], extras: tuple[str, ...]) -> L | None:
    """Of one image's locks, the one locked with the fewest lifting extras that still holds all of a run's: GPT-2
    (none) meets the lock without TRL's lifts, a chat run the one with them."""
    lifting = set(LIFTING_EXTRAS) & set(extras)
    held = [locked for locked in candidates if lifting <= set(locked.extras)]
    return min(held, key=lambda locked: len(locked.extras), default=None)


def neuron_lock() -> LockedImage:
    """The Neuron SDK's stack, which every Trainium run meets (its requirements.txt keeps the image's packages)."""
    return next(locked for locked in locked_images().values() if "neuronx" in locked.image)


def container_pins(image: str, neuron: bool, extras: tuple[str, ...], task_requires: tuple[str, ...]) -> dict[str, str]:
    """What a container's requirements.txt pins: the lifted packages of the lock its run is rehearsed in; none for
    an image without a lock (a user's image_uri of another release), whose requirements.txt keeps its ranges."""
    if neuron:
        return neuron_lock().pins
    candidates = of_image(image, task_requires, locked_images().values())
    locked = fitting(candidates, extras)
    if locked is None and (unlocked := not_locked_for(candidates, extras)):
        warnings.warn(
            f"no lock of the image {image.rsplit('/', 1)[-1]} was made with the {' and '.join(unlocked)} extra this "
            "run's requirements.txt lifts its packages with, so requirements.txt gives ranges: the container's pip "
            "picks their versions the day the job runs, and no rehearsal ran with them; a newer transformers_version "
            "has a lock that covers it (nbtoolkit rehearse --image-env says which)",
            SpecWarning,
            stacklevel=2,
        )
    return locked.pins if locked is not None else {}
