"""The two Trainium notebooks run top to bottom offline (smoke mode) and show the tutorials' launch."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from tests.notebook_runner import execute

pytestmark = pytest.mark.heavy  # minutes of real training: run first under pytest -n (tests/conftest.py)

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"


def outputs_text(notebook) -> str:
    return "\n".join(
        str(output.get("text", "")) + str(output.get("data", {}).get("text/plain", ""))
        for cell in notebook.cells
        if cell.cell_type == "code"
        for output in cell.outputs
    )


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        (
            "bert-emotion-trainium",
            [
                "bert-base-uncased: 0.11B parameters; 2 x Trainium-NeuronCore on trn1.2xlarge",
                "accuracy 0.167 before training ->",
                "torchrun --nnodes=1 --nproc_per_node=2",
            ],
        ),
        (
            "t5-summarization-trainium",
            [
                "stages: precompile -> train -> predict",
                "NEURON_NUM_DEVICES=0 OMP_NUM_THREADS=4 python3 -m nbtoolkit.train.predict --spec spec.json",
                "stages: train succeeded",
                "eval_rouge1",
                "model: t5-small",
                "neuron_parallel_compile torchrun --nnodes=1 --nproc_per_node=2",
            ],
        ),
    ],
)
def test_trainium_notebook_runs_in_smoke_mode(name, expected, home):
    notebook = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    assert "SMOKE = True" in notebook.cells[1].source and "THE ONE CELL TO CHANGE" in notebook.cells[1].source
    execute(notebook, NOTEBOOKS, timeout=600)  # in its folder, as Jupyter runs it
    text = outputs_text(notebook)
    for line in expected:
        assert line in text
    # the Neuron launch, as the tutorials run it: precompile, then torchrun with one worker per NeuronCore
    assert "export NEURON_RT_STOCHASTIC_ROUNDING_EN=1" in text and "export NEURON_CC_FLAGS=--cache_dir=" in text
    assert "XLA_USE_BF16=1" not in text  # ended with Neuron 2.24: full bf16 is the cast with stochastic rounding
    assert "neuron-ls is not on PATH here" in text  # off Trainium: one sentence, before anything starts
    # the smoke job ran as a 2-process torchrun job, and the saved chart is the finished one
    assert "torchrun job" in text and ": succeeded" in text
    chart = next(
        output
        for cell in notebook.cells
        if cell.cell_type == "code"
        for output in cell.outputs
        if "image/png" in output.get("data", {})
    )
    assert "succeeded" in chart["data"]["text/plain"] and "100%" in chart["data"]["text/plain"]
