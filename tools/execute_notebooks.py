"""Execute the example notebooks in smoke mode and save them with their outputs (`make notebooks`).

Each notebook runs in notebooks/ with a throw-away job store, offline, as a stranger's kernel would; the
hash of its code is stored in its metadata so a test can tell when code changed without a re-run.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import tempfile
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
OFFLINE = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def code_hash(notebook: nbformat.NotebookNode) -> str:
    """What the saved outputs were computed from: every code cell's source, in order."""
    code = "\n\x00".join(cell.source for cell in notebook.cells if cell.cell_type == "code")
    return hashlib.sha256(code.encode()).hexdigest()


def execute(path: Path, timeout: int) -> float:
    notebook = nbformat.read(path, as_version=4)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="nbtoolkit-notebook-home-") as home:
        os.environ["NBTOOLKIT_HOME"] = home
        NotebookClient(
            notebook,
            timeout=timeout,
            kernel_name="python3",
            store_widget_state=True,
            resources={"metadata": {"path": str(path.parent)}},
        ).execute()
    notebook.metadata["nbtoolkit"] = {"code_sha256": code_hash(notebook)}
    nbformat.write(notebook, path)
    return time.monotonic() - started


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=Path, help="default: every notebook in notebooks/")
    parser.add_argument("--timeout", type=int, default=900, help="seconds a cell may run")
    args = parser.parse_args(argv)
    os.environ.update(OFFLINE)
    for path in args.notebooks or sorted(NOTEBOOKS.glob("*.ipynb")):
        print(f"{path.name}: {execute(path.resolve(), args.timeout):.0f} s", flush=True)


if __name__ == "__main__":
    sys.exit(main())
