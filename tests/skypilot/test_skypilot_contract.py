"""nbtoolkit's SkyPilot backend and its stand-in (tests/skypilot/fake_sky) against the real SkyPilot 0.14.1.

The calls are found by reading the backend's source (every call of a name imported from `sky`), not listed by hand,
and the real SkyPilot, in the environment of its own that `make test-setup` builds (.venv-skypilot), is asked
(tests/skypilot/skypilot_probe.py) whether each binds with the arguments the backend passes, whether the task YAML
the backend writes loads (its schema, sky/utils/schemas.py get_task_schema, then sky.Task and sky.Resources), and
what its exit codes are. A test fails when the backend passes an argument or writes a key the real SkyPilot refuses,
or when the stand-in takes a call the real one would refuse.
"""

from __future__ import annotations

import ast
import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import nbtoolkit.backends.skypilot as backend
from nbtoolkit.backends import dispatch
from nbtoolkit.backends.skypilot import follow
from nbtoolkit.spec import load_spec
from tests.skypilot.skypilot_probe import parameters, resolve

HERE = Path(__file__).resolve().parent
BACKEND = Path(backend.__file__).parent


def dotted(node: ast.expr) -> str | None:
    """`sky.jobs.launch` of a call's function, when it is a plain chain of names."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = dotted(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


def sky_imports(tree: ast.AST) -> dict[str, str]:
    """Local name -> SkyPilot's dotted name, for every `import sky...` and `from sky... import x` of a module."""
    names = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "sky":
                    names[alias.asname or "sky"] = alias.name if alias.asname else "sky"
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "sky":
            for alias in node.names:
                names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return names


def backend_calls() -> tuple[list[dict], dict[str, list[str]]]:
    """Every call of SkyPilot in the backend (name, positional count, keywords, where), and the attributes the
    backend reads on what a call returned (`task = sky.Task.from_yaml_config(...)`; `task.name`)."""
    calls, attributes = [], {}
    for path in sorted(BACKEND.glob("*.py")):
        tree = ast.parse(path.read_text())
        imported = sky_imports(tree)
        results = {}
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call) or (name := dotted(node.func)) is None:
                continue
            root, _, rest = name.partition(".")
            if root not in imported:
                continue
            real = ".".join(filter(None, [imported[root], rest]))
            assert not any(isinstance(arg, ast.Starred) for arg in node.args), f"{path.name}:{node.lineno}"
            assert all(keyword.arg for keyword in node.keywords), f"{path.name}:{node.lineno}: **kwargs"
            where = f"{path.relative_to(BACKEND.parents[2])}:{node.lineno}"
            calls.append(
                {"name": real, "positional": len(node.args), "keywords": [k.arg for k in node.keywords], "where": where}
            )
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and len(node.targets) == 1:
                name, target = dotted(node.value.func), node.targets[0]
                if name and name.partition(".")[0] in imported and isinstance(target, ast.Name):
                    results[target.id] = f"{imported[name.partition('.')[0]]}.{name.partition('.')[2]}"
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in results:
                attributes.setdefault(results[node.value.id], []).append(node.attr)
    return calls, {name: sorted(set(read)) for name, read in attributes.items()}


def written_keys(config: dict, prefix: str = "") -> set[str]:
    """The task YAML's keys as paths (`resources.ordered.accelerators`), file_mounts' targets left out."""
    found = set()
    for key, value in config.items():
        path = f"{prefix}{'*' if prefix == 'file_mounts.' else key}"
        found.add(path)
        values = value if isinstance(value, list) else [value]
        for item in values:
            if isinstance(item, dict) and key != "secrets":
                found |= written_keys(item, f"{path}.")
    return found


def task_variants(folder: Path) -> dict[str, dict]:
    """The task YAML of specs that between them take every branch of the backend's task (checked below)."""
    data = folder / "mine.jsonl"  # a local data file: copied to every node by the task's file_mounts
    data.write_text('{"text": "a row", "label": "calm"}\n')
    specs = {
        "flan-t5-xl (fallbacks, spot, a bucket)": (HERE / "flan-t5-xl-skypilot.yaml").read_text(),
        "a token, a data file, a cloud and region, an instance type, a bucket mounted as is": {
            "task": "text-classification",
            "hardware": {"target": "skypilot", "accelerator": "cuda", "instance_type": "g5.xlarge"},
            "skypilot": {"cloud": "aws", "region": "us-east-1", "bucket": "s3://b/c", "bucket_mode": "MOUNT"},
            "extra": {"hub_token": "$HF_TOKEN"},
            "dataset": {"files": {"train": str(data)}},
        },
        "fallbacks on other clouds": {
            "task": "text-classification",
            "hardware": {"target": "skypilot", "accelerator": "cuda"},
            "skypilot": {"accelerators": "T4:1", "fallbacks": [{"accelerators": "L4:1", "cloud": "gcp"}]},
        },
    }
    return {
        name: yaml.safe_load(dispatch.render(load_spec(spec)).files["skypilot/task.yaml"])
        for name, spec in specs.items()
    }


@pytest.fixture(scope="module")
def skypilot(tmp_path_factory, skypilot_python):
    """The real SkyPilot's answer for every call the backend makes and every task variant (one interpreter: its
    import takes seconds)."""
    folder = tmp_path_factory.mktemp("skypilot")
    calls, attributes = backend_calls()
    assert set(attributes) <= {"sky.Task.from_yaml_config"}, f"the probe builds only tasks: {attributes}"
    tasks = task_variants(folder)
    request = {"calls": calls, "tasks": tasks, "task_attributes": attributes.get("sky.Task.from_yaml_config", [])}
    done = subprocess.run(
        [skypilot_python, str(HERE / "skypilot_probe.py")],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        timeout=120,
        cwd=folder,
    )
    assert done.returncode == 0, done.stderr
    return {"request": request, **json.loads(done.stdout.splitlines()[-1])}


def test_the_backends_calls_are_found_in_its_source():
    calls, attributes = backend_calls()
    assert {call["name"] for call in calls} == {  # a new call is checked below without being added here
        "sky.Task.from_yaml_config",
        "sky.get",
        "sky.jobs.launch",
        "sky.jobs.cancel",
        "sky.jobs.tail_logs",
        "sky.client.sdk.get",
        "sky.client.sdk.enabled_clouds",
    }
    assert attributes == {"sky.Task.from_yaml_config": ["name", "num_nodes"]}
    launch = next(call for call in calls if call["name"] == "sky.jobs.launch")
    assert (launch["positional"], launch["keywords"]) == (1, ["name"])


def test_every_call_binds_to_the_real_skypilots_signature(skypilot):
    assert skypilot["version"] == "0.14.1"
    refused = {where: error for where, error in skypilot["bind_errors"].items() if error}
    assert not refused, f"the real SkyPilot would raise TypeError: {refused}"


def test_every_task_yaml_the_backend_writes_loads_in_the_real_skypilot(skypilot):
    refused = {variant: error for variant, error in skypilot["task_errors"].items() if error}
    assert not refused, refused
    keys = set().union(*(written_keys(config) for config in skypilot["request"]["tasks"].values()))
    # every key the backend's task and resources functions can write is in some variant, so each was checked
    source = ast.parse((BACKEND / "task.py").read_text())
    named = {
        node.value
        for function in source.body
        if isinstance(function, ast.FunctionDef) and function.name in {"task", "resources"}
        for node in ast.walk(function)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.isidentifier()
    }
    assert named <= {key.rpartition(".")[2] for key in keys}, named - {key.rpartition(".")[2] for key in keys}
    assert {"resources.ordered.cloud", "secrets", "file_mounts.*.mode", "resources.instance_type"} <= keys


def test_the_exit_codes_the_follower_reads_are_skypilots(skypilot):
    codes = skypilot["job_exit_codes"]  # sky/exceptions.py JobExitCode
    assert (codes["SUCCEEDED"], codes["CANCELLED"]) == (follow.SUCCEEDED, follow.CANCELLED)
    said = {
        "FAILED": "failed",
        "NOT_FINISHED": "did not finish",
        "NOT_FOUND": "was not found",
        "CANCELLED": "was cancelled",
    }
    assert {codes[name]: sentence for name, sentence in said.items()} == follow.EXIT_CODES


@pytest.fixture
def stand_in(monkeypatch):
    """The stand-in importable as `sky` in this process, and gone again after (a later test's find_spec('sky'))."""
    monkeypatch.syspath_prepend(str(HERE / "fake_sky"))
    kept = {name: sys.modules.pop(name) for name in list(sys.modules) if name.partition(".")[0] == "sky"}
    yield importlib.import_module("sky")
    for name in [name for name in sys.modules if name.partition(".")[0] == "sky"]:
        del sys.modules[name]
    sys.modules.update(kept)


def test_the_stand_in_takes_exactly_the_calls_the_real_skypilot_takes(skypilot, stand_in):
    """Same parameters, kinds and defaults where they are plain values: no call binds to the stand-in that the real
    SkyPilot refuses, so a test passing on the stand-in cannot hide a TypeError."""
    for name, real in skypilot["parameters"].items():
        stand_ins = parameters(resolve(name))
        for parameter, (_, _, _, default) in zip(stand_ins, real, strict=False):
            if str(default).startswith("<"):  # a sentinel object of SkyPilot's (AUTO_JOB_GROUP): any default will do
                parameter[3] = default
        assert stand_ins == real, name
    config = skypilot["request"]["tasks"]["fallbacks on other clouds"]
    task = stand_in.Task.from_yaml_config(config, secrets_overrides=[("HF_TOKEN", "x")])
    assert all(hasattr(task, name) for name in skypilot["request"]["task_attributes"])
