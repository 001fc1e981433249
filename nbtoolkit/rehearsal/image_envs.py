"""The Python packages each real launch's image runs, and a side environment of exactly those per image, where
`nbtoolkit rehearse SPEC --image-env` runs the training program: the libraries a paid run meets, not the lock's.

Each image's fact table is tests/facts/images/NAME.json (its packages with the Dockerfile they are read from), its
environment is locked and hashed like requirements-floor.lock (requirements-image-NAME.lock, `make lock`) and built
once into .venv-image-NAME, rebuilt when the lock changes. What the container's requirements.txt lifts
(nbtoolkit.train.supported_versions.container_requirements) is lifted here too, and each lock is made for one
requirements.txt (an image's table per set of lifting extras and task lines: GPT-2's hf-gpu-5.3.0 holds no TRL
lifts, the chat runs' hf-gpu-5.3.0-chat does; a table with `same_image_as` takes that table's packages); the
versions the lock lifts an image's packages to are pinned in the container's requirements.txt (nbtoolkit.launching.image_pins),
so the paid run installs what the rehearsal ran with. torch is the lock's CPU build: the
images' torch 2.8 and 2.9 have only CUDA builds on the registry. These environments need nbtoolkit's source
checkout (its tables, locks and uv), as .venv-floor does.

    python -m nbtoolkit.rehearsal.image_envs requirements NAME   # the lock's input (`make lock` reads it)
    python -m nbtoolkit.rehearsal.image_envs build [NAME ...]     # build (or keep) the environments (`make image-envs`)
    python -m nbtoolkit.rehearsal.image_envs pins                 # nbtoolkit/launching/image_pins.json from the locks (`make lock`)
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from nbtoolkit import backends
from nbtoolkit.launching.image_pins import PINS, fitting, not_locked_for, of_image
from nbtoolkit.launching.shipping import ship_package
from nbtoolkit.spec import RunSpec, SpecError
from nbtoolkit.tasks import TASKS
from nbtoolkit.train.supported_versions import container_requirements

ROOT = Path(__file__).resolve().parents[2]
TABLES = ROOT / "tests" / "facts" / "images"
#: the only CPU build of torch this project's registry and wheel folder hold (the lock's): the images' own torch
#: (2.8.0, 2.9.0) is on PyPI as CUDA builds only, which pull GBs of nvidia wheels and do not import without CUDA
CPU_TORCH = "2.13.0+cpu"
TORCH_WHEELS = (
    "/opt/wheels"
    if any(Path("/opt/wheels").glob("torch-*+cpu-*.whl"))
    else "https://download.pytorch.org/whl/cpu/torch/"
)
SYNC_OPTIONS = ("--require-hashes", "--compile-bytecode", "--find-links", TORCH_WHEELS)
#: the libraries the report names, in this order
REPORTED = (
    "transformers",
    "accelerate",
    "datasets",
    "peft",
    "trl",
    "evaluate",
    "huggingface-hub",
    "optimum-neuron",
    "torch",
)
BUILD = "make image-envs"


class ImageEnvError(SpecError):
    """An image environment that is missing or did not build; the message says which and what to run."""


@dataclass(frozen=True)
class ImageStack:
    """One image's packages (tests/facts/images/NAME.json) and what the container's requirements.txt asks beside."""

    name: str
    image: str
    python: str
    torch: str
    source: dict[str, str]
    packages: tuple[str, ...]  # requirement strings, as the image's Dockerfile (or a package it installs) pins them
    extras: tuple[str, ...]  # nbtoolkit's extras whose requirements.txt lines its launches carry
    keep_image_stack: bool
    launches: tuple[str, ...]
    cannot_install_here: dict[str, str] = field(default_factory=dict)
    #: the launches' task's own requirements (Task.requires), which its requirements.txt carries beside
    task_requires: tuple[str, ...] = ()
    #: image packages the container's pip replaces as dependencies of what requirements.txt lifts
    lifted_with: tuple[str, ...] = ()

    @property
    def lock(self) -> Path:
        return ROOT / f"requirements-image-{self.name}.lock"

    @property
    def folder(self) -> Path:
        return ROOT / f".venv-image-{self.name}"

    def requirements(self) -> list[str]:
        """The environment's input: the image's pins, except those a requirements.txt line lifts (the container's
        pip replaces a version below the line by the newest that fits), then the lines, then the CPU torch."""
        lines = container_requirements(self.extras, self.keep_image_stack, self.task_requires)
        asked = {Requirement(line).name: line for line in lines}
        kept = [
            line
            for line in self.packages
            if not _lifted(Requirement(line), asked) and Requirement(line).name not in self.lifted_with
        ]
        return [*kept, *asked.values(), f"torch=={CPU_TORCH}"]


def _lifted(pinned: Requirement, asked: dict[str, str]) -> bool:
    line = asked.get(pinned.name)
    if line is None:
        return False
    versions = [spec.version for spec in pinned.specifier if spec.operator == "=="]
    return bool(versions) and not Requirement(line).specifier.contains(versions[0], prereleases=True)


def stacks() -> dict[str, ImageStack]:
    """Every image's table, by name."""
    found = {}
    for path in sorted(TABLES.glob("*.json")):
        table = json.loads(path.read_text())
        if "same_image_as" in table:  # another lock of that table's image: its packages, this run's requirements.txt
            table = {**json.loads((TABLES / f"{table['same_image_as']}.json").read_text()), **table}
        found[path.stem] = ImageStack(
            name=path.stem,
            image=table["image"],
            python=table["python"],
            torch=table["torch"],
            source=table["source"],
            packages=tuple(table["packages"]),
            extras=tuple(table["requirements_txt"]["extras"]),
            keep_image_stack=table["requirements_txt"]["keep_image_stack"],
            launches=tuple(table["launches"]),
            cannot_install_here=table.get("cannot_install_here", {}),
            task_requires=tuple(table["requirements_txt"].get("task_requires", ())),
            lifted_with=tuple(table["requirements_txt"].get("lifted_with", ())),
        )
    return found


def stack_of(spec: RunSpec) -> ImageStack | None:
    """The image a spec's run meets: Neuron SDK 2.26's stack for Trainium, else the image its backend picks (by the
    tag's transformers version) locked with what the run's requirements.txt lifts (nbtoolkit.launching.image_pins, as its
    requirements.txt's pins); None for a machine where nbtoolkit is installed with its lock (local, Slurm)."""
    if not TABLES.is_dir():
        raise ImageEnvError(f"--image-env needs nbtoolkit's source checkout: {TABLES} is not here")
    tables = stacks()
    local = spec.hardware.target == backends.LOCAL
    image = None if local else backends.get_backend(spec.hardware.target).container_image(spec)
    if spec.hardware.accelerator == "neuron":  # a trn1 machine set up as docs/launchers.md says, or the SDK's image
        neuron = next(stack for stack in tables.values() if "neuronx" in stack.image)
        if image is None or image.rsplit("/", 1)[-1] == neuron.image.rsplit("/", 1)[-1]:
            return neuron
        raise ImageEnvError(
            f"no fact table of the image {image} (tests/facts/images/ holds Neuron SDK 2.26's, "
            f"{neuron.image.rsplit('/', 1)[-1]}): leave sagemaker.image_uri out to rehearse the image nbtoolkit "
            "picks, or rehearse without --image-env"
        )
    if image is None:
        return None
    candidates = of_image(image, TASKS[spec.task].requires, tables.values())
    if not candidates:
        known = ", ".join(sorted({stack.image.rsplit("/", 1)[-1] for stack in tables.values()}))
        raise ImageEnvError(
            f"no fact table of the image {image} (tests/facts/images/ has {known}): add one with its Dockerfile's "
            "packages, or rehearse without --image-env"
        )
    stack = fitting(candidates, spec.extras_used)
    if stack is None:  # its packages would not be the container's, and a rehearsal in them pass or fail for nothing
        widest = max(candidates, key=lambda stack: len(stack.extras))
        raise ImageEnvError(
            f"the image environment {widest.name} is locked for runs without the "
            f"{' and '.join(not_locked_for(candidates, spec.extras_used))} "
            "extra, whose requirements.txt lines lift that image's packages: this run's is not built here; rehearse "
            "it without --image-env, or add a table for it under tests/facts/images/"
        )
    return stack


def lifted_pins(stack: ImageStack) -> dict[str, str]:
    """The image's packages its lock holds at another version than the image's own (what the container's pip
    lifts), with the lock's version: what the container's requirements.txt pins (nbtoolkit.launching.image_pins)."""
    locked = {
        canonicalize_name(found[1]): found[2]
        for found in re.finditer(r"^([A-Za-z0-9._-]+)==(\S+)", stack.lock.read_text(), re.MULTILINE)
    }
    pins = {}
    for line in stack.packages:
        requirement = Requirement(line)
        name = canonicalize_name(requirement.name)
        own = [spec.version for spec in requirement.specifier if spec.operator == "=="]
        if own and name in locked and locked[name] != own[0]:
            pins[name] = locked[name]
    return pins


def pins_file() -> str:
    """image_pins.json's text: each image lock's image, what it was locked with, and its lifted pins."""
    entries = {
        stack.name: {
            "image": stack.image,
            "extras": list(stack.extras),
            "task_requires": list(stack.task_requires),
            "pins": lifted_pins(stack),
        }
        for stack in stacks().values()
    }
    return json.dumps(entries, indent=2) + "\n"


def lock_sha(stack: ImageStack) -> str:
    return hashlib.sha256(stack.lock.read_bytes()).hexdigest()


def python_of(stack: ImageStack) -> Path:
    return stack.folder / "bin" / "python"


def is_built(stack: ImageStack) -> bool:
    """Built from the lock as it is now (the stamp holds the hash of the lock it was built from)."""
    stamp = stack.folder / ".installed"
    return stack.lock.is_file() and stamp.is_file() and stamp.read_text().strip() == lock_sha(stack)


def build(stack: ImageStack, say: Callable[[str], None] = print) -> Path:
    """The environment's Python, built first if it is missing or older than its lock (about a minute: uv's output
    shows the progress); a failure is one sentence."""
    if not stack.lock.is_file():
        raise ImageEnvError(f"{stack.lock.name} is missing: `make lock` writes it from tests/facts/images/")
    if is_built(stack):
        return python_of(stack)
    uv = shutil.which("uv") or str(Path(sys.executable).with_name("uv"))
    if not Path(uv).is_file():
        raise ImageEnvError(f"uv is not installed beside {sys.executable}: `{BUILD}` installs it and builds")
    say(f"building the environment of image {stack.name} from {stack.lock.name} (once; about a minute) ...")
    started = time.monotonic()
    shutil.rmtree(stack.folder, ignore_errors=True)  # a half-built one is not reused
    for command in (
        [uv, "venv", "--quiet", "--python", sys.executable, str(stack.folder)],
        [uv, "pip", "sync", "--python", str(python_of(stack)), *SYNC_OPTIONS, str(stack.lock)],
    ):
        reason = _run_shown(command)
        if reason is not None:
            raise ImageEnvError(f"the environment of image {stack.name} did not build ({reason}): `{BUILD}` retries")
    (stack.folder / ".installed").write_text(lock_sha(stack))
    say(f"built {stack.folder.name} in {time.monotonic() - started:.0f} s")
    return python_of(stack)


def _run_shown(command: list[str]) -> str | None:
    """Run a build step with its output shown as it comes; None when it succeeded, else its last line."""
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert process.stdout is not None
    last = "no output"
    for line in process.stdout:
        sys.stderr.write(line)
        last = line.strip() or last
    return None if process.wait() == 0 else last


def versions(python: Path) -> dict[str, str]:
    """What an environment holds of the reported libraries, read in it."""
    script = (
        "import importlib.metadata as m, json, sys\n"
        "found = {}\n"
        "for name in sys.argv[1:]:\n"
        "    try: found[name] = m.version(name)\n"
        "    except m.PackageNotFoundError: pass\n"
        "print(json.dumps(found))"
    )
    done = subprocess.run([str(python), "-c", script, *REPORTED], capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def report_line(stack: ImageStack, found: dict[str, str]) -> str:
    """What the rehearsal ran under, and what stands in for what the image has."""
    listed = ", ".join(f"{name} {found[name]}" for name in REPORTED if name in found and name != "torch")
    python = ".".join(map(str, sys.version_info[:2]))
    return (
        f"image environment {stack.name} ({stack.image.split('/')[-1]}): {listed}; torch {found.get('torch')} stands "
        f"in for the image's {stack.torch} (no CPU build of it on the registry), Python {python} for its {stack.python}"
        + (f"; not installable here: {', '.join(stack.cannot_install_here)}" if stack.cannot_install_here else "")
    )


@dataclass(frozen=True)
class ImageRun:
    """How a rehearsal runs the program in an image's environment: its Python, the variables that put the shipped
    program first (not installed there, as in the images), and the report's line of versions."""

    python: str | None
    env: dict[str, str]
    line: str


LOCK_MACHINE = (
    "this run's machine runs nbtoolkit installed with its own lock (requirements.lock, `make install`): rehearsed "
    "under the lock's libraries, as without --image-env"
)


def image_run(spec: RunSpec, workdir: Path, say: Callable[[str], None] = print) -> ImageRun:
    """The environment of the image a spec's run meets, built if need be, with the program shipped into `workdir`
    the way a SageMaker job's code folder carries it (nbtoolkit.launching.shipping)."""
    stack = stack_of(spec)
    if stack is None:
        return ImageRun(python=None, env={}, line=LOCK_MACHINE)
    python = build(stack, say)
    code = workdir / "code"
    ship_package(code)
    boot = code / "nbtoolkit" / "runner" / "stage_boot"  # the shipped copy's, as a job's stages get it here
    return ImageRun(
        python=str(python),
        env={"PYTHONPATH": os.pathsep.join([str(boot), str(code)])},
        line=report_line(stack, versions(python)),
    )


def main(argv: list[str]) -> int:
    command, *names = argv
    chosen = [stacks()[name] for name in names] if names else list(stacks().values())
    if command == "requirements":
        print("\n".join(line for stack in chosen for line in stack.requirements()))
    elif command == "build":
        for stack in chosen:
            print(report_line(stack, versions(build(stack))))
    elif command == "pins":
        PINS.write_text(pins_file())
    elif command == "names":
        print(" ".join(stack.name for stack in chosen))
    else:
        raise SystemExit(f"unknown command {command!r}: requirements, build, pins or names")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main(sys.argv[1:]))
