"""Shared fixtures: every test gets its own job store, and nothing reaches a hub."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

os.environ.update(
    HF_HUB_OFFLINE="1",
    HF_DATASETS_OFFLINE="1",
    TRANSFORMERS_OFFLINE="1",
    HF_HUB_DISABLE_TELEMETRY="1",
    TOKENIZERS_PARALLELISM="false",
)
# `make test` runs two workers on two cores: a thread per core in each job's torch would oversubscribe
# them (18% less CPU for the same tests with one)
os.environ.setdefault("OMP_NUM_THREADS", "1")

TESTS = Path(__file__).resolve().parent
DATA = TESTS / "data"
SCRIPTS = TESTS / "scripts"
PYTHON = sys.executable
#: browser tests run in their own pytest invocation (`pytest -p no:asyncio tests/ui`, see tests/ui/conftest.py), the
#: GGUF export's in theirs (`make test-gguf`: llama.cpp's environment is minutes to build, not part of test-setup), the
#: rehearsals in the images' packages in theirs (`make test-images`: minutes of training beside CI's 20-minute budget)
collect_ignore = ["ui", "gguf", "images"]
#: `pytest --isolation`: a test that leaves process state changed behind it fails (tests/isolation.py)
pytest_plugins = ["tests.isolation"]


def pytest_configure(config):
    from tests.faults.ledger import open_ledger

    open_ledger(config)
    config.addinivalue_line(
        "markers", "heavy: a file of minutes of real multi-process training, run first under pytest -n"
    )


def pytest_collection_modifyitems(config, items):
    """Files marked `heavy` (minutes of real multi-process training each) are collected first, so that
    `pytest -n 2 --dist loadfile --no-loadscope-reorder` starts them early and both workers end together,
    instead of one idling while the other runs the last heavy file."""
    items.sort(key=lambda item: item.get_closest_marker("heavy") is None)  # stable: pytest-randomly's order stays


@pytest.fixture(autouse=True)
def _torch_seeded(request):
    """torch's generator reseeded before each test when torch is loaded (with the run's seed under
    `-p randomly`, which reseeds `random` and numpy too), so a tolerance never depends on what ran before."""
    torch = sys.modules.get("torch")
    if torch is not None and hasattr(torch, "manual_seed"):
        torch.manual_seed(request.config.getoption("randomly_seed", default=0) or 0)


def pytest_sessionfinish(session):
    """The warm interpreters the suite's jobs made end with it (in the controller of `pytest -n`, after every
    worker), not IDLE_S later."""
    if not hasattr(session.config, "workerinput"):
        from nbtoolkit.runner.warm_interpreter import stop_all

        stop_all()


def pytest_terminal_summary(terminalreporter, config):
    """The fault suite's closing line (tests/faults), here so that the controller of `pytest -n` prints it."""
    from tests.faults.ledger import close_ledger

    close_ledger(terminalreporter, config)


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    """A fresh NBTOOLKIT_HOME (job store) for this test, inherited by the jobs it starts."""
    path = tmp_path / "nbhome"
    monkeypatch.setenv("NBTOOLKIT_HOME", str(path))
    return path


@pytest.fixture
def fetched(tmp_path, monkeypatch):
    """`fetched(name, config)`: the hub model's config.json (default empty) in a Hugging Face cache of this test's own, as `hf download`
    leaves it, so the preflight sees the model as on this machine; no weights, nothing downloaded."""
    import huggingface_hub.constants

    cache = tmp_path / "hub-cache"
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(cache))
    revision = "0" * 40

    def fetch(name: str, config: dict | None = None) -> None:
        repo = cache / f"models--{name.replace('/', '--')}"
        (repo / "snapshots" / revision).mkdir(parents=True)
        (repo / "refs").mkdir()
        (repo / "refs" / "main").write_text(revision)
        (repo / "snapshots" / revision / "config.json").write_text(json.dumps(config or {}))

    return fetch


@pytest.fixture
def cached_dataset(tmp_path, monkeypatch):
    """`cached_dataset(name)`: a folder where datasets looks for an offline hub dataset's cached copy
    (`<namespace>___<snake_case name>/<config>/<version>/<hash>`, its CachedDatasetModuleFactory), in a cache of this
    test's own, so the preflight sees the dataset as on this machine; no rows, nothing downloaded."""
    from datasets import config
    from datasets.naming import camelcase_to_snakecase

    cache = tmp_path / "datasets-cache"
    monkeypatch.setattr(config, "HF_DATASETS_CACHE", cache)

    def cache_it(name: str) -> None:
        *namespace, dataset = name.split("/")
        folder = "___".join([*namespace, camelcase_to_snakecase(dataset)])
        (cache / folder / "default" / "0.0.0" / "0123abcd").mkdir(parents=True)

    return cache_it


@pytest.fixture
def store(home):
    from nbtoolkit.runner import JobStore

    return JobStore(home)


@pytest.fixture
def shell(home):
    """A real IPython shell with `%load_ext nbtoolkit` done, its jobs in a fresh store."""
    from IPython.core.interactiveshell import InteractiveShell

    ip = InteractiveShell.instance()
    ip.extension_manager.load_extension("nbtoolkit")
    return ip
