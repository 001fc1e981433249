"""notebooks/flan-t5-deepspeed-plan.ipynb runs top to bottom offline, as a user would run it."""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbclient import NotebookClient

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "flan-t5-deepspeed-plan.ipynb"


def test_plan_notebook_runs_offline(home):
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    assert "REAL = False" in notebook.cells[1].source and "THE ONE CELL TO CHANGE" in notebook.cells[1].source
    client = NotebookClient(
        notebook,
        timeout=900,
        kernel_name="python3",  # in its folder, as Jupyter runs it
        resources={"metadata": {"path": str(NOTEBOOK.parent)}},
    )
    client.execute()
    text = "\n".join(
        output.get("text", "") or str(output.get("data", {}).get("text/plain", ""))
        for cell in notebook.cells
        if cell.cell_type == "code"
        for output in cell.get("outputs", [])
    )
    assert "google/flan-t5-xxl: 11,135,332,352 parameters" in text
    assert "p3.16xlarge" in text and "no bf16" in text  # the what-fits-where table
    # the tutorial's own run (specs/flan-t5-xxl.yaml) fits, and why: gradient checkpointing
    assert "memory per device:" in text and "fits" in text and "cheaper setups that fit:" in text
    assert "without gradient checkpointing:" in text and "does not fit in 40 GiB" in text
    assert "the tutorial reports about 10 h: the planner's estimate is" in text
    assert "task: summarization" in text and "deepspeed job" in text and ": succeeded" in text
