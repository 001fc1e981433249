"""notebooks/bert-qa-sagemaker.ipynb runs top to bottom offline, as a user would run it: smoke mode,
the local AWS stand-in, the real SageMaker SDK."""

from __future__ import annotations

from pathlib import Path

import pytest

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "bert-qa-sagemaker.ipynb"


def test_sagemaker_notebook_runs_offline(tmp_path, home):
    pytest.importorskip("sagemaker.train", reason="the SageMaker SDK is the optional extra nbtoolkit[sagemaker]")
    pytest.importorskip("moto", reason="moto is the local AWS stand-in")
    nbformat = pytest.importorskip("nbformat", reason="nbclient/nbformat run the notebook")
    from nbclient import NotebookClient

    notebook = nbformat.read(NOTEBOOK, as_version=4)
    assert "LIVE = False" in notebook.cells[1].source and "ONE CELL TO CHANGE" in notebook.cells[1].source
    NotebookClient(notebook, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    text = "\n".join(output.get("text", "") or str(output.get("data", {}).get("text/plain", ""))
                     for cell in notebook.cells if cell.cell_type == "code" for output in cell.get("outputs", []))
    assert "parallelism.strategy 'smddp' does not run on 'ml.p3.16xlarge'" in text
    assert "trainer = ModelTrainer(" in text and "'ACCELERATE_SAGEMAKER_DISTRIBUTED_TYPE': 'DATA_PARALLEL'" in text
    assert "huggingface-pytorch-training:2.1.0-transformers4.36.0" in text  # the SMDDP request
    assert "smdistributed-modelparallel:" in text and "'tensor_parallel_degree': 4" in text  # the SMP request
    assert "Interrupted: Spot capacity was interrupted" in text and "resuming from" in text
    assert "Completed; billable" in text and "spot_savings_pct" in text
    assert text.count("stopped") >= 3 and "succeeded" in text
