"""The supported-versions floor (nbtoolkit/train/supported_versions.py) is a tested fact: the training program trains
a LoRA causal LM and a chat model (TRL's SFT) under the floor's libraries, in `.venv-floor` (`make test-setup` builds
it from requirements-floor.lock), and under the lock's, in this environment; the same runs at length are
tests/test_adapters.py and tests/test_chat_tasks.py.

The program runs as `python -m nbtoolkit.train`, from this checkout, with nbtoolkit's distribution metadata beside it
as an install would leave it (its backends are entry points): the floor environment holds the libraries only.
"""

from __future__ import annotations

import importlib.metadata
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from nbtoolkit.backends.sagemaker.images import DISTRIBUTION
from nbtoolkit.train.supported_versions import FLOOR

pytestmark = pytest.mark.heavy  # five training processes at once: run first under pytest -n (tests/conftest.py)

ROOT = Path(__file__).resolve().parents[1]
FLOOR_PYTHON = ROOT / ".venv-floor" / "bin" / "python"
TRAIN = {"max_steps": 3, "batch_size": 4, "logging_steps": 1, "learning_rate": 1.0e-3}
SAMPLES = {"max_train_samples": 24}
#: the runs: a fractional warmup, which 4.56.2 takes only as warmup_ratio, on the LoRA one
RUNS = {
    "lora": {"task": "causal-lm", "adapter": {"r": 8}, "dataset": SAMPLES, "train": {**TRAIN, "warmup": 0.5}},
    "chat": {"task": "chat", "dataset": SAMPLES, "train": TRAIN},
}
#: under the floor only (the lock's is tests/test_chat_tasks.py): GRPO generates, and 4.56.2's generate refused the
#: token_type_ids its default tokenizer names
FLOOR_ONLY = {"grpo": {"task": "grpo", "train": {**TRAIN, "max_steps": 2}}}
#: what each run saves: the adapter alone, or the whole model
SAVED = {"lora": "adapter_model.safetensors", "chat": "model.safetensors", "grpo": "model.safetensors"}


def installed_metadata(site: Path) -> Path:
    """nbtoolkit's METADATA and entry points as pip leaves them, in a folder to put on PYTHONPATH."""
    distribution = importlib.metadata.distribution(DISTRIBUTION)
    info = site / f"{DISTRIBUTION.replace('-', '_')}-{distribution.version}.dist-info"
    info.mkdir(parents=True)
    for name in ("METADATA", "entry_points.txt"):
        (info / name).write_text(distribution.read_text(name) or "")
    return site


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[tuple[str, str], Path]:
    """Each run under its environments, all started at once (one torch thread each); their job folders."""
    if not FLOOR_PYTHON.is_file():
        pytest.fail(f"{FLOOR_PYTHON} is missing: `make test-setup` builds it from requirements-floor.lock")
    base = tmp_path_factory.mktemp("floor")
    site = installed_metadata(base / "site")
    environment = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)]),
        "OMP_NUM_THREADS": "1",
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "NBTOOLKIT_HOME": str(base / "home"),
    }
    started = {}
    for python_name, python, runs in (("floor", str(FLOOR_PYTHON), RUNS | FLOOR_ONLY), ("lock", sys.executable, RUNS)):
        for run, spec in runs.items():
            folder = base / f"{python_name}-{run}"
            folder.mkdir()
            (folder / "spec.yaml").write_text(yaml.safe_dump(spec))
            command = [python, "-m", "nbtoolkit.train", "--spec", "spec.yaml"]
            log = (folder / "output.log").open("w")
            started[python_name, run] = subprocess.Popen(
                command, cwd=folder, env=environment, stdout=log, stderr=subprocess.STDOUT
            )
    try:
        for key, process in started.items():
            assert process.wait(timeout=300) == 0, (base / "-".join(key) / "output.log").read_text()[-3000:]
    finally:
        for process in started.values():
            if process.poll() is None:
                process.kill()
                process.wait()
    return {key: base / "-".join(key) for key in started}


def test_the_floor_environment_holds_the_floor_and_its_lock_says_so():
    lock = (ROOT / "requirements-floor.lock").read_text().splitlines()
    for floor in FLOOR:
        assert any(line.startswith(f"{floor.package}=={floor.version} ") for line in lock), (floor, "run `make lock`")
    if not FLOOR_PYTHON.is_file():
        pytest.fail(f"{FLOOR_PYTHON} is missing: `make test-setup` builds it from requirements-floor.lock")
    script = "import importlib.metadata as m, json, sys; print(json.dumps({p: m.version(p) for p in sys.argv[1:]}))"
    found = subprocess.run(
        [str(FLOOR_PYTHON), "-c", script, *(floor.package for floor in FLOOR)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(found.stdout) == {floor.package: floor.version for floor in FLOOR}


def train_records(folder: Path) -> list[dict]:
    records = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]
    return [record for record in records if record["kind"] == "train"]


@pytest.mark.parametrize("python", ["floor", "lock"])
@pytest.mark.parametrize("run", RUNS)
def test_the_program_trains_and_saves_under_the_floor_and_the_lock(runs, python, run):
    folder = runs[python, run]
    train = train_records(folder)
    assert [record["step"] for record in train] == [1, 2, 3]
    assert all(math.isfinite(record["loss"]) for record in train)
    assert '"kind": "summary"' in (folder / "metrics.jsonl").read_text()
    assert (folder / "output" / "model" / SAVED[run]).is_file()
    # 4.56.2 would count padding as input tokens (its include_num_input_tokens_seen is a bool): no tokens/s there
    assert all(("tokens_per_second" in record) == (python == "lock") for record in train), train


@pytest.mark.parametrize("run", RUNS)
def test_the_floor_trains_as_the_lock_does(runs, run):
    """The same seeded run: the same learning rates (LoRA's warmup 0.5 reaches 4.56.2 as its warmup_ratio) and the
    same losses (4.56.2 logs them to 4 decimals)."""
    floor, lock = train_records(runs["floor", run]), train_records(runs["lock", run])
    assert [r["learning_rate"] for r in floor] == pytest.approx([r["learning_rate"] for r in lock], rel=1e-9)
    assert [r["loss"] for r in floor] == pytest.approx([r["loss"] for r in lock], abs=1e-4)
    if run == "lora":  # warmup over 2 of the 3 steps: the rate climbs from 0
        assert floor[0]["learning_rate"] == 0.0 < floor[1]["learning_rate"] < floor[2]["learning_rate"]


def test_grpo_generates_and_trains_under_the_floor(runs):
    folder = runs["floor", "grpo"]
    train = train_records(folder)
    assert [record["step"] for record in train] == [1, 2]
    assert all("completions/mean_length" in record and math.isfinite(record["loss"]) for record in train), train
    assert (folder / "output" / "model" / SAVED["grpo"]).is_file()
