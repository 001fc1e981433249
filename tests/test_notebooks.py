"""Notebooks executed headless in a real kernel (nbclient): the magics, the form, the quickstart."""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbformat.v4 import new_code_cell, new_notebook

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def execute(notebook: nbformat.NotebookNode, cwd: Path, timeout: int = 300) -> nbformat.NotebookNode:
    NotebookClient(
        notebook,
        timeout=timeout,
        kernel_name="python3",
        store_widget_state=True,
        resources={"metadata": {"path": str(cwd)}},
    ).execute()
    return notebook


def text_of(cell: nbformat.NotebookNode) -> str:
    parts = []
    for output in cell.outputs:
        parts.append(output.get("text", ""))
        parts += [str(value) for key, value in output.get("data", {}).items() if key.startswith("text/")]
    return "\n".join(parts)


def test_magics_and_form_in_a_real_kernel(home, tmp_path):
    notebook = new_notebook(
        cells=[
            new_code_cell("%load_ext nbtoolkit"),
            new_code_cell("%%finetune --dry-run --steps 7\ntask: text-classification\nprecision: bf16"),
            new_code_cell("form = %finetune --form --task summarization --zero 2\nform"),
            new_code_cell("form.fields['parallelism.zero_stage'].value = 3\nprint(form.spec.to_yaml())"),
            new_code_cell("%jobs"),
        ]
    )
    cells = execute(notebook, tmp_path).cells
    assert "max_steps: 7" in text_of(cells[1]) and "-m nbtoolkit.train --spec spec.json" in text_of(cells[1])
    view = next(output for output in cells[2].outputs if WIDGET_VIEW in output.get("data", {}))
    states = notebook.metadata.widgets["application/vnd.jupyter.widget-state+json"]["state"]
    root = states[view.data[WIDGET_VIEW]["model_id"]]
    assert "nbtoolkit-form" in root["state"]["_dom_classes"]
    # the saved widget state is the final one: the ZeRO stage the fourth cell set
    assert any(
        state["state"].get("description") == "ZeRO stage" and state["state"].get("index") == 3
        for state in states.values()
    )
    assert "zero_stage: 3" in text_of(cells[3]) and "strategy: deepspeed" in text_of(cells[3])
    assert "no jobs yet" in text_of(cells[4])


def test_quickstart_runs_offline_end_to_end(home, tmp_path):
    notebook = execute(nbformat.read(NOTEBOOKS / "quickstart.ipynb", as_version=4), tmp_path)

    def cell(prefix: str) -> nbformat.NotebookNode:
        return next(cell for cell in notebook.cells if cell.cell_type == "code" and cell.source.startswith(prefix))

    assert any(WIDGET_VIEW in output.get("data", {}) for output in cell("%finetune --form").outputs)
    assert "launched" in text_of(cell("%%finetune"))
    assert any("image/png" in output.get("data", {}) for output in cell("%%finetune").outputs)  # the final chart
    assert "'succeeded'" in text_of(cell("job = _"))
    assert "loss" in text_of(cell("job.metrics()"))
    assert "quickstart" in text_of(cell("%jobs")) and "succeeded" in text_of(cell("%jobs"))
    assert "job succeeded" in text_of(cell("%job {job.id}"))
