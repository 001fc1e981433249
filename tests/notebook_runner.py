"""Run notebooks headless (nbclient) and record every display update the kernel sends."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import nbformat
from nbclient import NotebookClient


class RecordingClient(NotebookClient):
    """An nbclient that keeps, per display id, the data of every update_display_data it received."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.updates: dict[str, list[dict]] = defaultdict(list)

    def process_message(self, msg, cell, cell_index):
        content = msg["content"]
        display_id = (content.get("transient") or {}).get("display_id")
        if msg["msg_type"] == "update_display_data" and display_id:
            self.updates[display_id].append(content["data"])
        return super().process_message(msg, cell, cell_index)


def notebook(*cells: str) -> nbformat.NotebookNode:
    return nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in cells])


def execute(nb: nbformat.NotebookNode, cwd: Path, timeout: int = 600) -> RecordingClient:
    """Execute in place (the cells' outputs are filled in) with the venv's python3 kernel."""
    client = RecordingClient(nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(cwd)}})
    client.execute()
    return client


def saved(nb: nbformat.NotebookNode, path: Path) -> nbformat.NotebookNode:
    """Write the notebook as a user would save it, and read it back."""
    nbformat.write(nb, path)
    return nbformat.read(path, as_version=4)


def display_outputs(cell) -> list:
    return [output for output in cell.outputs if output.output_type == "display_data"]
