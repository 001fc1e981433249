"""notebooks/flan-t5-deepspeed-plan.ipynb runs top to bottom offline, as a user would run it."""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbclient import NotebookClient

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "flan-t5-deepspeed-plan.ipynb"


def test_plan_notebook_runs_offline(tmp_path, home):
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    client = NotebookClient(notebook, timeout=900, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    text = "\n".join(output.get("text", "") or str(output.get("data", {}).get("text/plain", ""))
                     for cell in notebook.cells if cell.cell_type == "code" for output in cell.get("outputs", []))
    assert "google/flan-t5-xxl: 11,135,332,352 parameters" in text
    assert "p3.16xlarge" in text and "no bf16" in text  # the what-fits-where table
    assert "memory per device:" in text and "cheaper setups that fit:" in text  # the seed's plan
    assert "with the seed's pace: 10.0 h" in text
    assert "task: summarization" in text  # the smoke spec, shown
