"""`nbtoolkit eval`: lm-evaluation-harness on a job's base and its tuned model, against lm-eval run by hand.

One tiny LoRA job (the bundled GPT-2-shaped model, its base saved beside the adapter) is evaluated on the bundled
harness task (lm-eval's YAML format, 20 multiple-choice rows in a JSONL beside it): offline, as users run it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from nbtoolkit.api import launch
from nbtoolkit.backends import LaunchError
from nbtoolkit.inputs.bundled import ASSETS
from nbtoolkit.spec import load_spec
from nbtoolkit.trained_model.harness import base_model, command, rows, stored

TASK = "nbtoolkit_tiny"


def by_hand(runs: dict[str, tuple[str, Path]]) -> dict[str, dict]:
    """lm-eval's own command line, as its README gives it, on each model folder; each run's results.

    Both run in one fresh interpreter, each command line in turn given to what the `lm-eval` command runs
    (lm_eval.__main__:cli_evaluate, its entry_points.txt): each run is lm-eval's own, from parsing its arguments
    to writing its results file, and lm-eval's start-up (torch, transformers, datasets) is paid once, not twice."""
    lines = [
        ["lm-eval", "run", "--model", "hf", "--model_args", model_args, "--tasks", TASK,
         "--include_path", str(ASSETS / "harness"), "--batch_size", "8", "--output_path", str(out)]
        for model_args, out in runs.values()
    ]  # fmt: skip
    in_turn = "import sys\nfrom lm_eval.__main__ import cli_evaluate\n" + "".join(
        f"sys.argv = {line!r}\ncli_evaluate()\n" for line in lines
    )
    subprocess.run([sys.executable, "-c", in_turn], check=True, capture_output=True, timeout=300)
    return {
        model: json.loads(next(out.rglob("results_*.json")).read_text())["results"][TASK]
        for model, (_, out) in runs.items()
    }


def test_nbtoolkit_eval_gives_lm_evals_own_numbers_for_base_and_tuned_side_by_side(store, tmp_path, capsys):
    from nbtoolkit.cli import main

    train = {"max_steps": 4, "batch_size": 4, "learning_rate": 0.05, "logging_steps": 1}
    job = launch({"task": "causal-lm", "adapter": {"r": 4}, "train": train}, store=store)
    assert job.wait(timeout=300) == "succeeded", job.logs(tail=30)

    assert main(["eval", job.id, "--tasks", TASK]) == 0
    printed = capsys.readouterr().out
    results = stored(job.dir)
    assert results is not None and results.missing is None
    measured = {row["metric"]: row for row in results.rows}
    assert set(measured) == {"acc", "acc_norm"} and {row["task"] for row in results.rows} == {TASK}

    tuned = job.dir / "eval" / "harness" / "merged"  # the adapter merged into its base, for the evaluation alone
    base = job.dir / "output" / "model" / "base"  # the bundled base's weights, saved beside the adapter
    assert not (job.dir / "output" / "merged").exists()  # a merge of the user's own is never overwritten
    assert f"pretrained={base},tokenizer={tuned}" in results.commands["base"]  # each model where it belongs
    hand = by_hand(
        {
            "tuned": (f"pretrained={tuned}", tmp_path / "tuned"),
            "base": (f"pretrained={base},tokenizer={tuned}", tmp_path / "base"),
        }
    )
    for metric, row in measured.items():
        for model in ("base", "tuned"):
            assert row[model] == hand[model][f"{metric},none"], (metric, model)
            assert row[f"{model}_stderr"] == hand[model][f"{metric}_stderr,none"], (metric, model)
        assert row["difference"] == row["tuned"] - row["base"]
    assert f"{TASK}" in printed and "difference" in printed  # the table, printed
    # the stored commands are lm-eval's own, runnable as shown
    assert (
        results.commands["tuned"][1:4] == ["-m", "lm_eval", "run"]
        and f"pretrained={tuned}" in results.commands["tuned"]
    )

    figure = results.figure()  # the notebook's chart: base and tuned bars per task and metric
    assert [text.get_text() for text in figure.axes[0].get_legend().get_texts()] == ["base", "tuned"]


def test_rows_pair_base_and_tuned_per_task_and_metric_and_keep_a_missing_stderr_missing():
    tuned = {"results": {"grp": {"acc,none": 0.5, "acc_stderr,none": "N/A", "alias": "grp"},
                         "sub": {"acc,none": 0.75, "acc_stderr,none": 0.1, "exact_match,strict": 0.25}}}  # fmt: skip
    base = {"results": {"grp": {"acc,none": 0.25, "acc_stderr,none": "N/A"}, "sub": {"acc,none": 0.5}}}
    found = rows(["grp"], {"base": base, "tuned": tuned})
    assert [(row["task"], row["metric"]) for row in found] == [
        ("grp", "acc"),
        ("sub", "acc"),
        ("sub", "exact_match,strict"),
    ]
    assert found[0] == {
        "task": "grp", "metric": "acc", "base": 0.25, "base_stderr": None, "tuned": 0.5, "tuned_stderr": None,
        "difference": 0.25,
    }  # fmt: skip
    assert found[2]["base"] is None and found[2]["difference"] is None
    assert rows(["grp"], {"base": None, "tuned": tuned})[0]["base"] is None  # a base not evaluated


def test_a_chat_run_is_evaluated_with_its_template_and_a_bundled_full_runs_base_is_said_missing(tmp_path):
    chat = command({"pretrained": "/m/base", "tokenizer": "/m/tuned"}, ["arc_easy"], tmp_path, chat_template=True)
    assert (
        "--apply_chat_template" in chat
        and chat[chat.index("--model_args") + 1] == "pretrained=/m/base,tokenizer=/m/tuned"
    )
    full = load_spec({"task": "causal-lm"})
    assert base_model(full, tmp_path) == (
        None,
        "the base is the bundled tiny model, built with random weights inside the run and not kept",
    )
    hub = load_spec({"task": "causal-lm", "model": "gpt2"})
    assert base_model(hub, tmp_path) == ({"pretrained": "gpt2"}, None)


def test_lm_eval_is_refused_in_one_sentence_for_a_task_that_is_not_a_language_model(store):
    from nbtoolkit.trained_model.harness import check_task

    with pytest.raises(LaunchError, match=r"^lm-eval evaluates language models, and this job's task is text-class"):
        check_task("text-classification")


def test_bad_evaluation_input_is_one_sentence_before_any_model_loads(tmp_path):
    from nbtoolkit.trained_model.harness import check_limit, checked, validate_tasks

    for limit in (0, -5, 2.5):
        with pytest.raises(LaunchError, match=rf"^limit {limit:g} is not a number of examples per task; give a whole"):
            check_limit(limit)
    check_limit(0.25), check_limit(200)
    assert command({"pretrained": "/m"}, [TASK], tmp_path, limit=1234567.0)[-2:] == ["--limit", "1234567"]
    with pytest.raises(LaunchError, match=r"^lm-eval cannot be given /models/llama,v2: its --model_args split at"):
        checked("/models/llama,v2")
    with pytest.raises(LaunchError, match=r"^lm-eval does not know every task asked for \(Tasks not found: hellaswg"):
        validate_tasks([TASK, "hellaswg"])  # lm-eval's own check, before a merge or a model load
