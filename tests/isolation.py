"""The isolation guard: a test that leaves process state changed behind it fails, naming what it changed.

A change one test leaves in its worker (an environment variable, the working directory, a module swapped in
`sys.modules`, a registry, torch's global settings) passes that test and breaks whichever test the worker
runs next, in an order that changes with the seed. Each test's state is read before its set-up and again
after its tear-down; a difference fails the test at tear-down. What a fixture of wider scope (module,
session) sets up is its own to keep until it ends: those keys are excused for the rest of the session.
Registered from tests/conftest.py (`pytest_plugins`); on with `pytest --isolation` (off in `make test` until
every finding of a full run is mended: the first random-order run flagged two more, listed in
docs/development.md).
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

import pytest

BEFORE = pytest.StashKey[dict[str, dict[str, Any]]]()
#: (part, key) pairs a fixture wider than one test changed while it was set up: it may keep them
_owned: set[tuple[str, str]] = set()
#: what libraries set once on their own, the first time they are imported or used: no test's doing
LIBRARY_SET = {
    ("environment variable", "KMP_DUPLICATE_LIB_OK"),  # scikit-learn's import (evaluate's metrics load it)
    ("environment variable", "TORCHINDUCTOR_CACHE_DIR"),  # torch._inductor's cache_dir_utils, on first use
    ("environment variable", "KMP_INIT_AT_FORK"),  # scikit-learn's and joblib's import
    ("environment variable", "PYTORCH_NVML_BASED_CUDA_CHECK"),  # deepspeed's import
    ("module", "__main__"),  # IPython's one shell puts its own module in, multiprocessing an alias of it
    ("module", "__mp_main__"),
}


def _torch_state() -> dict[str, Any]:
    torch = sys.modules.get("torch")
    if torch is None or not hasattr(torch, "get_default_dtype"):
        return {}
    return {
        "default dtype": str(torch.get_default_dtype()),
        "threads": torch.get_num_threads(),
        "grad enabled": torch.is_grad_enabled(),
        "deterministic algorithms": torch.are_deterministic_algorithms_enabled(),
    }


def _registries() -> dict[str, Any]:
    found: dict[str, Any] = {}
    backends = sys.modules.get("nbtoolkit.backends")
    if backends is not None and backends.registered.cache_info().currsize:
        found["backends"] = {name: id(backend) for name, backend in backends.registered().items()}
    views = sys.modules.get("nbtoolkit.views")
    if views is not None:
        found["views"] = {name: id(view) for name, view in views._provided.items()}
    return found


def process_state() -> dict[str, dict[str, Any]]:
    """What one test must give back as it found it, by part, each a mapping of key to a comparable value."""
    import logging

    root = logging.getLogger()
    return {
        "environment variable": dict(os.environ),
        "process": {
            "working directory": os.getcwd(),
            # setuptools' import appends its _vendor folder, once
            "sys.path": [entry for entry in sys.path if not entry.endswith(os.path.join("setuptools", "_vendor"))],
            "SIGTERM handler": repr(signal.getsignal(signal.SIGTERM)),
            "SIGINT handler": repr(signal.getsignal(signal.SIGINT)),
            "root logger level": root.level,
            "root logger handlers": [type(handler).__name__ for handler in root.handlers],
        },
        # modules imported during a test stay (imports are meant to be kept); one removed or swapped is a leak
        "module": {name: id(module) for name, module in list(sys.modules.items())},
        "torch": _torch_state(),
        "registry": _registries(),
    }


def changed_keys(before: dict[str, dict[str, Any]], after: dict[str, dict[str, Any]]) -> list[tuple[str, str]]:
    """Every (part, key) whose value differs between two readings, added and removed keys included."""
    return [
        (part, key)
        for part, was in before.items()
        for key in sorted(set(was) | set(after[part]))
        if was.get(key) != after[part].get(key)
    ]


def differences(before: dict[str, dict[str, Any]], after: dict[str, dict[str, Any]]) -> list[str]:
    found = []
    for part, key in changed_keys(before, after):
        was, now = before[part], after[part]
        if (part, key) in _owned or (part, key) in LIBRARY_SET:
            continue
        if part in ("module", "torch") and key not in was:
            continue  # a module (torch among them) first imported by this test
        if key not in now:
            found.append(f"{part} {key} removed")
        elif key not in was:
            found.append(f"{part} {key} added")
        elif isinstance(was[key], list):
            added, removed = [x for x in now[key] if x not in was[key]], [x for x in was[key] if x not in now[key]]
            found.append(f"{part} {key} changed: added {_short(added)}, removed {_short(removed)}")
        else:
            found.append(f"{part} {key} changed: {_short(was[key])} -> {_short(now[key])}")
    return found


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 160 else text[:157] + "..."


def pytest_addoption(parser):
    parser.addoption("--isolation", action="store_true", help="fail a test that leaves process state changed")


@pytest.hookimpl(wrapper=True)
def pytest_fixture_setup(fixturedef, request):
    if fixturedef.scope == "function" or not request.config.getoption("isolation"):
        return (yield)
    before = process_state()
    try:
        return (yield)
    finally:
        _owned.update(changed_keys(before, process_state()))


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_setup(item):
    if item.config.getoption("isolation"):
        item.stash[BEFORE] = process_state()
    return (yield)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_teardown(item, nextitem):
    result = yield
    before = item.stash.get(BEFORE, None)
    if before is not None and (changed := differences(before, process_state())):
        pytest.fail(
            f"{item.nodeid} left process state changed behind it (restore it, e.g. with monkeypatch): "
            + "; ".join(changed),
            pytrace=False,
        )
    return result
