"""compare(): numbers from each run's own records, verdicts that tell the truth, and compiled vs native
end to end (the example notebook runs top to bottom under nbclient: an eager and a torch.compile job)."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from nbtoolkit.compiled import compiled_variants
from nbtoolkit.metrics.compare import RunMetrics, compare
from nbtoolkit.runner import JobStore
from tests.notebook_runner import display_outputs, execute, saved

pytestmark = pytest.mark.heavy  # minutes of real training: run first under pytest -n (tests/conftest.py)

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "gpt2-compiled-vs-native.ipynb"
PNG = b"\x89PNG\r\n\x1a\n"


def windows(speeds, loss_start=2.0, window_seconds=1.0, first_window_seconds=None, start=0.0):
    """Train records with per-window throughput, every 10 steps; the first window may be slow (compile)."""
    records, now = [], start
    for index, speed in enumerate(speeds):
        seconds = first_window_seconds if index == 0 and first_window_seconds else window_seconds
        now += seconds
        records.append(
            {
                "time": now,
                "step": 10 * (index + 1),
                "kind": "train",
                "loss": loss_start / (index + 1),
                "samples_per_second": speed,
                "tokens_per_second": 50 * speed,
                "window_seconds": seconds,
            }
        )
    return records


def test_steady_throughput_leaves_the_warm_up_out_and_prices_it_separately():
    native = RunMetrics("native", windows([90, 100, 100, 100]))
    compiled = RunMetrics("compiled", windows([5, 200, 200, 200], first_window_seconds=20.0))
    table = compare([native, compiled]).table
    assert table.loc["native", "samples_per_second"] == 100 and table.loc["compiled", "samples_per_second"] == 200
    assert table.loc["compiled", "speedup"] == 2.0
    assert table.loc["compiled", "warmup_seconds"] == 20.0
    # 20 s of warm-up did 100 samples, which take 0.5 s at steady speed: 19.5 s were compile
    assert table.loc["compiled", "warmup_overhead_seconds"] == pytest.approx(19.5)
    assert table.loc["native", "verdict"] == "baseline"


def test_verdict_is_honest_when_a_faster_steady_state_did_not_repay_its_compile():
    native = RunMetrics("native", windows([100] * 4))
    compiled = RunMetrics("compiled", windows([5, 200, 200, 200], first_window_seconds=20.0))
    table = compare([native, compiled]).table
    assert table.loc["compiled", "time_saved_seconds"] == pytest.approx(4 - 23)
    assert table.loc["compiled", "verdict"] == (
        "2.00x faster once warm, but 19.0s slower in total; its 20s extra warm-up pays off after about 39s of training"
    )


@pytest.mark.parametrize(
    ("speeds", "verdict"),
    [
        ([50, 50, 50], "slower: 0.50x the baseline's throughput, 3.0s slower in total"),
        ([101, 101, 101], "about the same speed (1.01x), 0.0s saved in total"),
        ([150, 150, 150], "1.50x faster, 0.0s saved in total"),
    ],
)
def test_verdicts(speeds, verdict):
    base = RunMetrics("base", windows([100, 100, 100]))
    other = RunMetrics("other", windows(speeds, window_seconds=2.0 if speeds[0] == 50 else 1.0))
    assert compare([base, other]).table.loc["other", "verdict"] == verdict


def test_captured_series_compare_like_jobs_and_labels_stay_unique():
    import pandas as pd

    logged = pd.DataFrame(
        [
            *windows([100, 100]),
            {"time": 3.0, "step": 20, "kind": "summary", "train_runtime": 2.5, "train_samples_per_second": 80.0},
        ]
    )
    logged.attrs["name"] = "from-log"
    comparison = compare([logged, RunMetrics("from-log", windows([100, 120]))], baseline=1)
    assert list(comparison.table.index) == ["from-log (0)", "from-log (1)"]
    assert comparison.baseline == "from-log (1)"
    assert comparison.table.loc["from-log (0)", "train_seconds"] == 2.5
    assert "cost_usd" not in comparison.table  # no run knows its price


def test_eval_metrics_are_the_last_evaluation_and_the_best_eval_loss():
    evals = [
        {"time": 1.0, "step": 10, "kind": "eval", "eval_loss": 0.9, "eval_accuracy": 0.5, "eval_runtime": 3.0},
        {"time": 2.0, "step": 20, "kind": "eval", "eval_loss": 1.1, "eval_accuracy": 0.6, "eval_runtime": 3.0},
    ]
    row = compare([RunMetrics("run", windows([10, 10]) + evals)]).table.loc["run"]
    assert (row["eval_loss"], row["eval_accuracy"], row["best_eval_loss"]) == (1.1, 0.6, 0.9)
    assert "eval_runtime" not in row  # the evaluation's own speed is not a model metric


def test_unknown_baseline_and_things_that_are_not_runs_are_refused():
    run = RunMetrics("a", windows([1, 2]))
    with pytest.raises(ValueError, match=r"baseline 'b' is not one of the compared runs; .*\('a'\)"):
        compare([run], baseline="b")
    with pytest.raises(TypeError, match="cannot compare int"):
        compare([run, 3])


def test_compiled_variants_share_seed_and_padding_and_differ_only_in_compile():
    native, compiled = compiled_variants({"task": "text-classification", "train": {"seed": 7}}).values()
    assert (native.compile, compiled.compile) == ("none", "torch")
    assert native.dataset.pad_to_max_length and compiled.dataset.pad_to_max_length
    assert native.train == compiled.train and native.train.seed == 7
    assert native.model_dump(exclude={"compile", "name"}) == compiled.model_dump(exclude={"compile", "name"})


def test_the_compiled_run_can_afford_the_larger_batch_it_fits():
    """The Training Compiler tutorial: batch 13 per GPU natively, 25 compiled, the learning rate scaled with it."""
    native, compiled = compiled_variants(
        {"task": "causal-lm", "train": {"batch_size": 13, "learning_rate": 5e-5 / 32 * 13, "seed": 3}},
        {"train": {"batch_size": 25, "learning_rate": 5e-5 / 32 * 25}},
    ).values()
    assert (native.train.batch_size, compiled.train.batch_size) == (13, 25)
    assert compiled.train.learning_rate == pytest.approx(3.90625e-5) and native.train.learning_rate == pytest.approx(
        2.03125e-5
    )
    assert compiled.train.seed == native.train.seed == 3 and compiled.compile == "torch"


def test_a_user_script_cannot_be_compared_compiled_vs_native():
    from nbtoolkit.spec import SpecError

    with pytest.raises(SpecError, match="script train.py decides for itself whether to compile"):
        compiled_variants({"task": "text-classification", "script": {"path": "train.py"}})


def test_on_neuron_native_means_the_same_run_on_cpu():
    spec = {
        "task": "text-classification",
        "hardware": {"accelerator": "neuron", "devices": 2},
        "parallelism": {"strategy": "xla"},
        "compile": "neuron",
    }
    variants = compiled_variants(spec)
    assert list(variants) == ["cpu", "neuron"]
    cpu, neuron = variants.values()
    assert (cpu.hardware.accelerator, cpu.compile, cpu.parallelism.strategy) == ("cpu", "none", "none")
    assert (neuron.hardware.accelerator, neuron.compile) == ("neuron", "neuron")


# -- end to end: the example notebook (eager + torch.compile jobs), then compare() on its jobs ----------------


@pytest.fixture(scope="module")
def compiled_notebook(tmp_path_factory):
    """Run notebooks/gpt2-compiled-vs-native.ipynb once in a real kernel, with its own job store."""
    home = tmp_path_factory.mktemp("compiled") / "nbhome"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("NBTOOLKIT_HOME", str(home))
        patch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
        import nbformat

        nb = nbformat.read(NOTEBOOK, as_version=4)
        execute(nb, NOTEBOOK.parent, timeout=900)
        nb = saved(nb, home.parent / "executed.ipynb")
    return nb, JobStore(home)


def code_cells(nb):
    return [cell for cell in nb.cells if cell.cell_type == "code"]


def test_example_notebook_runs_top_to_bottom_and_shows_the_analysis(compiled_notebook):
    nb, store = compiled_notebook
    cells = {cell.source.splitlines()[0]: cell for cell in code_cells(nb)}
    charts = display_outputs(
        cells["comparison = compare_compiled(spec, compiled_changes=COMPILED_CHANGES, on_launch=live_chart)"]
    )
    assert len(charts) == 2  # one live chart per job, each ending on its final image
    for chart, label in zip(charts, ("-eager", "-torch.compile"), strict=False):
        assert base64.b64decode(chart.data["image/png"]).startswith(PNG)
        assert label in chart.data["text/plain"] and "succeeded · step 40/40" in chart.data["text/plain"]
    figure = cells["comparison.figure()"].outputs
    assert any("image/png" in output.get("data", {}) for output in figure)
    assert "torch.compile" in cells["comparison.table"].outputs[0].data["text/html"]
    assert "torch.compile: " in cells["print(comparison.verdicts())"].outputs[0].text
    replayed = code_cells(nb)[-1].outputs[0].data["text/plain"]
    assert "native (from its log)" in replayed and "compiled (from its log)" in replayed
    assert (store.home / "cache" / "torchinductor").is_dir()  # compiled kernels are kept for the next run


def own_numbers(job_dir: Path) -> dict:
    """What a job's metrics.jsonl says, computed here from the file, independently of compare()."""
    records = [json.loads(line) for line in (job_dir / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in records if r["kind"] == "train"]
    steady = train[1:]  # warm-up: the first logging window
    seconds = sum(r["window_seconds"] for r in steady)
    return {
        "samples_per_second": sum(r["samples_per_second"] * r["window_seconds"] for r in steady) / seconds,
        "tokens_per_second": sum(r["tokens_per_second"] * r["window_seconds"] for r in steady) / seconds,
        "warmup_seconds": train[0]["window_seconds"],
        "final_loss": train[-1]["loss"],
        "best_loss": min(r["loss"] for r in train),
        "train_seconds": [r for r in records if r["kind"] == "summary"][-1]["train_runtime"],
        "steps": train[-1]["step"],
        "losses": [r["loss"] for r in train],
    }


def test_compare_on_the_eager_and_compiled_jobs_matches_their_metrics_files(compiled_notebook):
    _, store = compiled_notebook
    compiled, eager = store.list()  # newest first
    assert eager.name.endswith("-eager") and compiled.name.endswith("-torch.compile")
    comparison = compare([eager.id, compiled.id], store=store)
    table = comparison.table
    for record in (eager, compiled):
        row, own = table.loc[record.name], own_numbers(store.job_dir(record.id))
        for column in (
            "samples_per_second",
            "tokens_per_second",
            "warmup_seconds",
            "final_loss",
            "best_loss",
            "train_seconds",
            "steps",
        ):
            assert row[column] == pytest.approx(own[column]), column
        assert row["total_seconds"] == pytest.approx(record.ended - record.started)
        assert row["cost_usd"] == pytest.approx(0.23 * (record.ended - record.started) / 3600)
    speedup = table.loc[compiled.name, "samples_per_second"] / table.loc[eager.name, "samples_per_second"]
    assert table.loc[compiled.name, "speedup"] == pytest.approx(speedup)
    saved_seconds = (eager.ended - eager.started) - (compiled.ended - compiled.started)
    assert table.loc[compiled.name, "time_saved_seconds"] == pytest.approx(saved_seconds)
    verdict = table.loc[compiled.name, "verdict"]
    assert verdict.startswith(
        "slower" if speedup < 0.98 else "about the same" if speedup <= 1.02 else f"{speedup:.2f}x"
    )

    figure = comparison.figure(smoothing=0)
    bars, by_step, by_time = figure.axes
    assert [bar.get_height() for bar in bars.patches] == pytest.approx(list(table["samples_per_second"]))
    for line, record in zip(
        [line for line in by_step.lines if "eval" not in line.get_label()], (eager, compiled), strict=False
    ):
        assert list(line.get_ydata()) == pytest.approx(own_numbers(store.job_dir(record.id))["losses"])
    assert len(by_time.lines) == len(by_step.lines)


def test_a_comparison_displays_as_verdicts_and_table_then_the_figure():
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.display import display
    from IPython.utils.capture import capture_output

    InteractiveShell.instance()
    comparison = compare([RunMetrics("native", windows([100] * 3)), RunMetrics("compiled", windows([150] * 3))])
    with capture_output() as captured:
        display(comparison)
    table, figure = captured.outputs
    assert "<li>compiled: 1.50x faster" in table.data["text/html"] and "<table" in table.data["text/html"]
    assert base64.b64decode(figure.data["image/png"]).startswith(PNG)
