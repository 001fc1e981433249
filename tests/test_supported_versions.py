"""The supported-versions floor (nbtoolkit/train/supported_versions.py) is a tested fact: the training program trains
a LoRA causal LM and a chat model (TRL's SFT) under the floor's libraries, in `.venv-floor` (`make test-setup` builds
it from requirements-floor.lock), and under the lock's, in this environment; the same runs at length are
tests/test_adapters.py and tests/test_chat_tasks.py.

The program runs as `python -m nbtoolkit.train` from a code folder as a SageMaker job's container gets it (the
package and its distribution's metadata, nbtoolkit.backends.sagemaker.code): the floor environment holds the
libraries only, and nbtoolkit is not installed there, as in the images.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from nbtoolkit.backends.sagemaker.code import ship_package
from nbtoolkit.train.supported_versions import ALSO_IMPORTED, FLOOR

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


def floor_python() -> str:
    if not FLOOR_PYTHON.is_file():
        pytest.fail(f"{FLOOR_PYTHON} is missing: `make test-setup` builds it from requirements-floor.lock")
    return str(FLOOR_PYTHON)


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[tuple[str, str], Path]:
    """Each run under its environments, all started at once (one torch thread each); their job folders."""
    floor = floor_python()
    base = tmp_path_factory.mktemp("floor")
    ship_package(base / "code")
    environment = {
        **os.environ,
        "PYTHONPATH": str(base / "code"),
        "OMP_NUM_THREADS": "1",
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "NBTOOLKIT_HOME": str(base / "home"),
    }
    started = {}
    for python_name, python, runs in (("floor", floor, RUNS | FLOOR_ONLY), ("lock", sys.executable, RUNS)):
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
    script = "import importlib.metadata as m, json, sys; print(json.dumps({p: m.version(p) for p in sys.argv[1:]}))"
    found = subprocess.run(
        [floor_python(), "-c", script, *(floor.package for floor in FLOOR)],
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


@pytest.mark.parametrize("golden", ["bert-qa-sagemaker", "chat-grpo-qwen"])
def test_a_container_loads_the_spec_it_was_shipped_without_nbtoolkit_installed(tmp_path, golden):
    """What the entry script does first in the image: load its spec.json from the code folder. The backends whose
    blocks the spec holds are found through the shipped metadata, and the launch's checks, which read the SageMaker
    SDK's image table (no SDK in the image), are not repeated there."""
    code = tmp_path / "code"
    ship_package(code)
    (code / "spec.json").write_text(
        (ROOT / "tests" / "golden" / golden / "sagemaker" / "code" / "spec.json").read_text()
    )
    script = (
        "import sys; from nbtoolkit.spec import load_spec; spec = load_spec('spec.json', launched=True); "
        "print(spec.hardware.target, spec.sagemaker.region, sys.modules['nbtoolkit'].__file__)"
    )
    environment = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    loaded = subprocess.run(
        [floor_python(), "-c", script], cwd=code, env=environment, capture_output=True, text=True, timeout=120
    )
    assert loaded.returncode == 0, loaded.stderr[-2000:]
    target, region, module = loaded.stdout.split()
    assert (target, region) == ("sagemaker", "us-east-1") and module == str(
        code / "nbtoolkit" / "__init__.py"
    )  # the shipped copy


def test_the_distribution_asks_for_the_floor_and_what_the_container_adds():
    """pyproject.toml's lower bounds are the floor (an install elsewhere gets what SageMaker's images are held to),
    and what the container's requirements.txt adds beside the floor is what the distribution asks for."""
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    asked = [*project["dependencies"], *(line for lines in project["optional-dependencies"].values() for line in lines)]
    for floor in FLOOR:
        assert f"{floor.package}>={floor.version}" in asked, floor
    assert set(ALSO_IMPORTED) <= set(project["dependencies"])


def test_the_trainium_install_in_the_docs_adds_everything_the_program_imports_beside_the_neuron_sdk():
    """A trn1 machine installs nbtoolkit with --no-deps (its SDK's stack stays) and then the lines docs/launchers.md
    gives: those must be ALSO_IMPORTED, every one (without rouge-score a T5 run trained, then failed at ROUGE)."""
    import re

    docs = (ROOT / "docs" / "launchers.md").read_text()
    command = re.search(r"`pip install (\"[^`]*\")`", docs)
    assert command is not None and "pip install --no-deps nbtoolkit-finetune" in docs
    assert re.findall(r'"([^"]+)"', command[1]) == list(ALSO_IMPORTED)
