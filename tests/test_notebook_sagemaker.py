"""notebooks/bert-qa-sagemaker.ipynb runs top to bottom offline, as a user would run it (smoke mode, the
local AWS stand-in, the real SageMaker SDK v3). Its spot job is the SageMaker lifecycle test: submitted,
in progress, log lines streamed and parsed into metrics, interrupted after a checkpoint, resumed from it,
completed, with billable time, cost and spot savings recorded."""

from __future__ import annotations

from pathlib import Path

import pytest

from nbtoolkit.runner import JobStore
from nbtoolkit.runner.listing import listing_row

pytestmark = pytest.mark.heavy  # minutes of real training: run first under pytest -n (tests/conftest.py)

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "bert-qa-sagemaker.ipynb"


def test_notebook_runs_offline_and_its_spot_job_resumes_after_an_interruption(tmp_path, home):
    import nbformat
    from nbclient import NotebookClient

    notebook = nbformat.read(NOTEBOOK, as_version=4)
    assert "LIVE = False" in notebook.cells[1].source and "ONE CELL TO CHANGE" in notebook.cells[1].source
    NotebookClient(
        notebook, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOK.parent)}}
    ).execute()  # in its folder, as Jupyter runs it: it reads specs/bert-qa-sagemaker.yaml
    text = "\n".join(
        output.get("text", "") or str(output.get("data", {}).get("text/plain", ""))
        for cell in notebook.cells
        if cell.cell_type == "code"
        for output in cell.get("outputs", [])
    )
    assert "parallelism.strategy 'smddp' does not run on 'ml.p3.16xlarge'" in text
    assert "trainer = ModelTrainer(" in text and "'ACCELERATE_SAGEMAKER_DISTRIBUTED_TYPE': 'DATA_PARALLEL'" in text
    assert "huggingface-pytorch-training:2.1.0-transformers4.36.0" in text  # the SMDDP request
    assert (
        "smdistributed-modelparallel:" in text and "'tensor_parallel_degree': 1" in text
    )  # the SMP request (BERT: sharded, not split)
    assert "'config.json'" in text and "'model.safetensors'" in text  # the model, where SageMaker uploads it from

    jobs = {record.name: record for record in JobStore(home).list()}
    assert {jobs[name].status for name in ("bert-qa-smddp", "bert-qa-sagemaker", "bert-mnli-smp")} == {"stopped"}
    # the tutorial's data-parallel run is the reviewed spec, on the tutorial's instances, in an image with sm_70
    assert "2 x ml.p3.16xlarge" in text and "huggingface-pytorch-training:2.8.0-transformers4.56.2" in text
    spot = jobs["bert-qa-spot"]
    assert spot.status == "succeeded" and spot.backend == "sagemaker" and spot.remote_name
    log = (JobStore(home).job_dir(spot.id) / "output.log").read_text()
    assert "[nbtoolkit] sagemaker: Interrupted: Spot capacity was interrupted" in log
    assert "[nbtoolkit] resuming from /" in log and "/checkpoints/checkpoint-" in log
    from nbtoolkit.metrics.series import read_metrics

    train = [record for record in read_metrics(JobStore(home).job_dir(spot.id)) if record["kind"] == "train"]
    steps = [record["step"] for record in train]
    assert steps[0] == 2 and steps.count(2) == 1 and steps[-1] == 12  # resumed at 4, not restarted from 0
    assert all(record["max_steps"] == 12 and record["samples_per_second"] > 0 for record in train)
    assert (spot.step, spot.total_steps) == (12, 12)
    info = spot.info
    assert info["status"] == "Completed" and not info["cost_estimated"]
    assert 1 <= info["billable_seconds"] < info["training_seconds"] and info["spot_savings_pct"] > 0
    assert info["cost_usd"] == round(1.515 * info["billable_seconds"] / 3600, 4)
    assert listing_row(spot)["cost"] == f"${info['cost_usd']:.2f}"
