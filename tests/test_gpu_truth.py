"""benchmarks/gpu_truth.py stays working: its tiny stand-ins run on CPU and fill the table it writes for a GPU."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "gpu_truth.py"


@pytest.fixture(scope="module")
def gpu_truth():
    spec = importlib.util.spec_from_file_location("gpu_truth", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["gpu_truth"] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    from nbtoolkit.planner import plan

    plan({"task": "text-classification"}, alternatives=False)  # the registries a plan loads, loaded for the module
    yield module
    del sys.modules["gpu_truth"]


def test_tiny_cases_on_cpu_write_a_row_each_with_prediction_and_measurement(gpu_truth, tmp_path, capsys):
    out = tmp_path / "gpu-truth.md"
    argv = ["--tiny", "--device", "cpu", "--variants", "fp32", "--cases", "BERT-base,LoRA", "--steps", "1"]
    assert gpu_truth.main([*argv, "--warmup", "1", "--out", str(out)]) == 0
    rows = [line.split(" | ") for line in out.read_text().splitlines() if line.startswith("| ") and "---" not in line]
    assert [row[0] for row in rows] == ["| case", "| BERT-base classification", "| Qwen2-0.5B-like chat, LoRA r=16"]
    for row in rows[1:]:
        assert row[1] == "fp32" and float(row[2]) > 0 and float(row[7].replace(",", "")) > 0  # predicted GiB, samples/s
        assert row[-1].strip() == "|"  # no note: nothing failed
    assert "on CPU (torch " in out.read_text()
    head = out.read_text().splitlines()[1]
    assert "tiny stand-ins of the models, not their real sizes" in head and " --cases BERT-base,LoRA --steps 1 " in head


def test_a_case_filter_matching_nothing_or_an_out_file_it_did_not_write_is_one_sentence(gpu_truth, tmp_path, capsys):
    """Both are refused before any case runs (a GPU's minutes are not spent on a typo or a page's prose)."""
    tiny = ["--tiny", "--device", "cpu"]
    assert gpu_truth.main([*tiny, "--cases", "zzz"]) == 2
    assert capsys.readouterr().err.strip() == (
        "gpu_truth: --cases zzz matches no case; the cases are BERT-base classification; BERT-large classification; "
        "T5-small summarization; T5-base summarization; GPT-2 causal LM; Qwen2-0.5B-like chat, full; "
        "Qwen2-0.5B-like chat, LoRA r=16"
    )
    page = tmp_path / "gpu-truth.md"
    page.write_text("# GPU truth\nprose\n")
    assert gpu_truth.main([*tiny, "--out", str(page)]) == 2
    assert "was not written by gpu_truth.py" in capsys.readouterr().err and page.read_text() == "# GPU truth\nprose\n"


def test_without_a_gpu_it_says_so_in_one_sentence(gpu_truth, capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    assert gpu_truth.main([]) == 2
    assert "no CUDA device here; run with --device cpu (and --tiny)" in capsys.readouterr().err


def test_a_gpu_runs_printed_rows_get_the_planners_predictions_here(gpu_truth, tmp_path):
    """A GPU machine without nbtoolkit's dependencies measures; the predictions are made where the planner runs."""
    log = tmp_path / "gpu.log"
    row = {"case": "BERT-base classification", "variant": "bf16", "predicted_gib": None, "allocated_gib": 3.08}
    row.update(reserved_gib=3.23, predicted_sps=None, measured_sps=1289.8, note="no prediction: No module named x")
    log.write_text(json.dumps(row) + "\nwarnings between\nMeasured 2026-11-30 00:46 UTC on NVIDIA H200 in 268 s.\n")
    out = tmp_path / "table.md"
    assert gpu_truth.main(["--predict-from", str(log), "--out", str(out)]) == 0
    [line] = [line for line in out.read_text().splitlines() if line.startswith("| BERT-base")]
    cells = [cell.strip() for cell in line.strip("|").split("|")]
    assert cells[:2] == ["BERT-base classification", "bf16"]
    assert float(cells[2]) > 0 and cells[3] == "3.08" and cells[7] == "1,289.8"  # predicted here, measured there
    assert cells[9] == ""  # the note of the missing prediction is gone with it
    assert "Measured 2026-11-30 00:46 UTC on NVIDIA H200" in out.read_text()
