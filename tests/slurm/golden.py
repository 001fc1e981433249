"""The golden of a realistic Slurm launch: tests/slurm/flan-t5-xxl-slurm.yaml rendered as a reviewer reads it.

Kept beside the Slurm tests rather than in notebooks/specs/ and tests/golden/, whose specs are the
example notebooks' runs. Rendered by tests/real_launches.py's `golden_files`, so it reads like the others.

    python -m tests.slurm.golden    # write it again (then read the diff)
"""

from __future__ import annotations

from pathlib import Path

from nbtoolkit.spec import load_spec
from tests.real_launches import golden_files

HERE = Path(__file__).resolve().parent
SPEC = HERE / "flan-t5-xxl-slurm.yaml"
GOLDEN = HERE / "golden" / SPEC.stem


def rendered() -> dict[str, str]:
    return golden_files(load_spec(SPEC.read_text()))


def kept() -> dict[str, str]:
    return {path.relative_to(GOLDEN).as_posix(): path.read_text() for path in GOLDEN.rglob("*") if path.is_file()}


def write_golden() -> None:
    for path in GOLDEN.rglob("*") if GOLDEN.exists() else []:
        if path.is_file():
            path.unlink()
    for name, text in rendered().items():
        (GOLDEN / name).parent.mkdir(parents=True, exist_ok=True)
        (GOLDEN / name).write_text(text)
    print(f"wrote {GOLDEN}: {', '.join(sorted(rendered()))}")


if __name__ == "__main__":
    write_golden()
