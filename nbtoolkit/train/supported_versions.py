"""The oldest libraries nbtoolkit's training program supports (its floor), each with where that version comes from.

SageMaker runs the program under the training image's own libraries, not the lock's: the oldest image nbtoolkit
picks (V100, ml.p3) carries transformers 4.56.2. The container's requirements.txt asks for these versions or newer,
the image check refuses an older transformers, and `make lock` writes requirements-floor.lock (`.venv-floor`) from
them, where tests/test_supported_versions.py trains the program, so the floor is a tested fact, not a hope.

    python -m nbtoolkit.train.supported_versions    # the floor as pins, and the rest (`make lock` reads them)
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

#: the oldest Hugging Face training image nbtoolkit picks: the newest one with V100 (sm_70) kernels
OLDEST_IMAGE = "huggingface-pytorch-training:2.8.0-transformers4.56.2-gpu-py312-cu129"


@dataclass(frozen=True)
class Floor:
    """One library's oldest supported version; `extra` is the distribution's extra that brings it (None: every run
    needs it), `source` says where the version comes from."""

    package: str
    version: str
    extra: str | None
    source: str


FLOOR = (
    Floor("transformers", "4.56.2", None, f"{OLDEST_IMAGE} (its Dockerfile's TRANSFORMERS_VERSION)"),
    Floor("accelerate", "1.10.1", None, f"{OLDEST_IMAGE} (ACCELERATE_VERSION)"),
    # the image carries 4.1.0; TRL lifts it in a chat run, and requirements.txt lifts it in every run, so one
    # floor holds for all runs (and a chat run's floor can be tested at all: TRL refuses 4.1.0)
    Floor("datasets", "4.7.0", None, "TRL 1.16's own requirement (datasets>=4.7.0 in its METADATA)"),
    Floor("peft", "0.17.1", "adapters", f"{OLDEST_IMAGE} (PEFT_VERSION)"),
    # the images carry TRL 0.23 (4.56.2) and 0.28 (5.3.0): the program's chat tasks are written for TRL 1.16
    Floor("trl", "1.16.0", "chat", "nbtoolkit's chat tasks (TRL's 1.x trainers); TRL 1.16 takes transformers>=4.56.2"),
)


#: what else the program imports in a container, as nbtoolkit's pyproject.toml asks for it: the spec's and the job
#: runtime's libraries, and summarization's ROUGE, which neither GPU image's Dockerfile names (without it, in the
#: floor's environment, a summarization run failed at its evaluation, after training)
ALSO_IMPORTED = ("pydantic>=2.6", "pyyaml>=6", "psutil>=5.9", "platformdirs>=3", "rouge-score>=0.1.2")

#: what keeps the images' datasets importable: pyarrow 26 declares no NumPy requirement but refuses NumPy 1.x at
#: import ("pyarrow requires NumPy 2.0 or newer", pyarrow/lib.pyx:42; measured here: 26.0.1 beside NumPy 1.26.4
#: raises, 25.0.1 imports), while the 5.3.0 image's Dockerfile installs `-U pyarrow` beside "numpy<2" (so a build
#: after pyarrow 26 came out holds both) and the Neuron one NumPy <= 1.26.4 (optimum-neuron 0.4.1); the container's
#: pip takes pyarrow back to 25 where the image has 26, and changes nothing where it has less
KEEPS_IMAGES_IMPORTABLE = ("pyarrow<26",)


def floor_version(package: str) -> str:
    """The oldest supported version of one library of FLOOR."""
    return next(floor.version for floor in FLOOR if floor.package == package)


def container_requirements(
    extras: tuple[str, ...],
    keep_image_stack: bool = False,
    task_requires: tuple[str, ...] = (),
    pins: Mapping[str, str] | None = None,
) -> list[str]:
    """requirements.txt lines for a container: every library the program imports there, those of the floor at the
    floor or newer; with `keep_image_stack` (a Trainium image), only the extras', by name and without a version, so
    pip keeps the image's: the Neuron SDK's optimum-neuron 0.4.1 pins accelerate, peft, trl and transformers (4.55.4,
    below this floor; its METADATA, tests/facts/images/hf-neuronx-sdk2.26.json), a line lifting one would replace the
    stack the Neuron engine was built against, and the program trains under them (tests/images rehearses an adapter
    with the image's PEFT 0.17.0).
    Naming transformers keeps the image's: with `trl>=1.16` alone, pip 26.3 over the oldest image's libraries took
    the newest datasets (5.2.0, huggingface-hub>=1.31) and so replaced transformers 4.56.2 by 5.24.0; with these
    lines it kept 4.56.2 and took datasets 5.0.1 (huggingface-hub<2.0). `task_requires` (the task's own, e.g.
    transformers>=5.18.0) replace the floor's line of the same library; KEEPS_IMAGES_IMPORTABLE holds in every image.
    `pins` (nbtoolkit.launching.image_pins: the versions the run's image lock lifts the image's packages to) replace the line of
    their package by `==` that version, or join the lines, so the container installs what the rehearsal ran with."""
    raised = {_name(line) for line in task_requires}
    lines = [
        *ALSO_IMPORTED,
        *KEEPS_IMAGES_IMPORTABLE,
        *(
            floor.package if keep_image_stack else f"{floor.package}>={floor.version}"
            for floor in FLOOR
            if (floor.extra in extras or (floor.extra is None and not keep_image_stack)) and floor.package not in raised
        ),
        *task_requires,
    ]
    pins = pins or {}
    named = {_name(line) for line in lines}
    return [
        *(f"{_name(line)}=={pins[_name(line)]}" if _name(line) in pins else line for line in lines),
        *(f"{package}=={version}" for package, version in pins.items() if package not in named),
    ]


def _name(line: str) -> str:
    """A requirement line's package, as pip compares names (lower case, `_` and `.` as `-`)."""
    return re.sub(r"[-_.]+", "-", re.split(r"[<>=!~ ;\[]", line, maxsplit=1)[0]).lower()


if __name__ == "__main__":
    print("\n".join([*(f"{floor.package}=={floor.version}" for floor in FLOOR), *ALSO_IMPORTED]))
