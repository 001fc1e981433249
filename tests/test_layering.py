"""The house's layering, read from the source: the core imports no backend and no view, a backend
imports no view and no other backend's insides, the training program knows only the spec and
the runtime contract, and no nbtoolkit modules import each other in a circle. Every import counts,
also those inside functions and `importlib.import_module("nbtoolkit....")` with a literal name; for the
circles, not those under `if TYPE_CHECKING:` (typing's, never run), and importing a.b.c counts as importing
its packages a.b too (their __init__.py runs first)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "nbtoolkit"
VIEWS = ("nbtoolkit.notebook", "nbtoolkit.server", "nbtoolkit.cli")
REGISTRY = "nbtoolkit.backends"
#: one package per task; the only modules that know a task by its name (tests/test_task_boundary.py)
TASKS_PACKAGE = "nbtoolkit.tasks"
#: the package root holds the Jupyter/IPython entry points and provides the notebook views to the core
ENTRY_POINTS = "nbtoolkit"
#: what the training program (python -m nbtoolkit.train, run inside every launch) must not know: it reads
#: the spec and the runtime contract (nbtoolkit.launching.runtime) and writes metrics, whoever launched it
TRAINING_PROGRAM_IGNORES = ("nbtoolkit.runner", "nbtoolkit.api", "nbtoolkit.planner", REGISTRY)


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(path: Path, source: str | None = None, *, run_time_only: bool = False) -> set[str]:
    """Every nbtoolkit module `path` imports: `from a.b import c` counts as a.b.c when c is a module, else a.b.
    `run_time_only`: without the imports under `if TYPE_CHECKING:` (annotations only)."""
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    found = set()
    tree = ast.parse(path.read_text() if source is None else source)
    for node in run_time_nodes(tree, type_checking_guards(tree)) if run_time_only else ast.walk(tree):
        if isinstance(node, ast.Call) and literal_import_module(node):
            found.add(node.args[0].value)  # type: ignore[attr-defined]  # a str Constant: literal_import_module
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:
                candidate = f"{base}.{alias.name}"
                found.add(candidate if is_module(candidate) else base)
    return {name for name in found if name == "nbtoolkit" or name.startswith("nbtoolkit.")}


def literal_import_module(call: ast.Call) -> bool:
    """`importlib.import_module("...")` or `import_module("...")` with a literal name as its first argument."""
    name = call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", None)
    return (
        name == "import_module"
        and bool(call.args)
        and isinstance(call.args[0], ast.Constant)
        and isinstance(call.args[0].value, str)
    )


def type_checking_guards(tree: ast.AST) -> set[str]:
    """How the module names typing's TYPE_CHECKING (`TYPE_CHECKING`, `typing.TYPE_CHECKING`, an alias): only
    typing's is false at run time; a name the module assigns itself is no guard."""
    guards, assigned = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "typing" and not node.level:
            guards.update(alias.asname or alias.name for alias in node.names if alias.name == "TYPE_CHECKING")
        elif isinstance(node, ast.Import):
            guards.update(
                f"{alias.asname or alias.name}.TYPE_CHECKING" for alias in node.names if alias.name == "typing"
            )
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            assigned.add(node.id)
    return guards - assigned


def run_time_nodes(tree: ast.AST, guards: set[str]) -> Iterator[ast.AST]:
    """Every node of the tree but the bodies of `if TYPE_CHECKING:` blocks (`guards`: its names here)."""
    yield tree
    for child in ast.iter_child_nodes(tree):
        if isinstance(child, ast.If) and ast.unparse(child.test) in guards:
            for other in child.orelse:
                yield from run_time_nodes(other, guards)
        else:
            yield from run_time_nodes(child, guards)


def with_packages(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """Each import of a.b.c also as one of its packages a.b (Python runs their __init__.py first), so a circle
    through a package's __init__.py shows. Not the root package: every module would lead to it, and it
    imports the API only inside functions that run later (its own imports count as they are). Not the
    importer's own packages either: they started before the importer ran, so its import of a sibling starts
    nothing new there; a package's __init__.py importing its own submodules is no circle by that alone
    (an explicit import of the package still counts)."""
    return {
        module: targets
        | {
            package
            for target in targets
            for package in packages_of(target)
            if package != "nbtoolkit" and not within(module, package)
        }
        for module, targets in graph.items()
    }


def packages_of(name: str) -> list[str]:
    """`nbtoolkit.a.b.c` -> nbtoolkit, nbtoolkit.a, nbtoolkit.a.b."""
    parts = name.split(".")
    return [".".join(parts[:end]) for end in range(1, len(parts))]


def is_module(name: str) -> bool:
    path = PACKAGE.parent.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def backend_of(name: str) -> str | None:
    """`nbtoolkit.backends.sagemaker.job` -> `nbtoolkit.backends.sagemaker`; the registry's own modules -> None."""
    parts = name.split(".")
    if len(parts) < 3 or parts[:2] != ["nbtoolkit", "backends"] or not is_package(".".join(parts[:3])):
        return None
    return ".".join(parts[:3])


def is_package(name: str) -> bool:
    return (PACKAGE.parent.joinpath(*name.split(".")) / "__init__.py").is_file()


MODULES = {module_name(path): imported(path) for path in sorted(PACKAGE.rglob("*.py"))}
RUN_TIME_IMPORTS = {module_name(path): imported(path, run_time_only=True) for path in sorted(PACKAGE.rglob("*.py"))}


def problems(rule) -> list[str]:
    return [
        f"{module} imports {target}"
        for module, targets in MODULES.items()
        for target in sorted(targets)
        if rule(module, target)
    ]


def core(module: str) -> bool:
    return module != ENTRY_POINTS and not within(module, REGISTRY) and not any(within(module, view) for view in VIEWS)


def test_the_layering_reads_every_module_and_its_imports():
    assert {"nbtoolkit.api", "nbtoolkit.backends.sagemaker.follow", "nbtoolkit.train.program"} <= set(MODULES)
    assert (
        "nbtoolkit.spec" in MODULES["nbtoolkit.api"]
        and "nbtoolkit.launching.launch" in MODULES["nbtoolkit.runner.supervisor"]
    )


def test_the_core_imports_no_backend_only_the_registry():
    assert problems(lambda module, target: core(module) and backend_of(target) is not None) == []


def test_the_core_and_the_backends_import_no_view():
    assert (
        problems(
            lambda module, target: (
                not any(within(module, view) for view in VIEWS)
                and module != ENTRY_POINTS
                and any(within(target, view) for view in VIEWS)
            )
        )
        == []
    )


def test_a_backend_imports_another_backend_only_by_its_public_modules():
    """Its package (the registered descriptor) or its render module (render's public helpers), nothing deeper."""

    def reaches_inside(module: str, target: str) -> bool:
        mine, theirs = backend_of(module), backend_of(target)
        return mine is not None and theirs not in (None, mine) and target not in (theirs, f"{theirs}.render")

    assert problems(reaches_inside) == []


def test_a_backend_package_and_its_block_import_only_the_registry_and_the_block_base():
    """The spec gathers every backend's block while it is itself imported: a descriptor that imported the
    spec (or anything that does) would be a cycle."""
    light = (REGISTRY, "nbtoolkit.spec_parts.block")
    descriptors = [
        module
        for module in MODULES
        if backend_of(module) == module or (backend_of(module) is not None and module.endswith(".settings"))
    ]
    assert len(descriptors) >= 7
    assert (
        problems(
            lambda module, target: (
                module in descriptors
                and target not in light
                and not target.startswith(f"{backend_of(module)}.settings")
            )
        )
        == []
    )


def training_program(module: str) -> bool:
    """The program's own modules, and each task's setup and answering function it imports (nbtoolkit/tasks/<task>/)."""
    parts = module.split(".")
    return within(module, "nbtoolkit.train") or (
        within(module, TASKS_PACKAGE) and len(parts) == 4 and parts[-1] in ("train", "answer")
    )


def test_the_training_program_knows_no_launcher_no_store_and_no_view():
    assert "nbtoolkit.tasks.grpo.train" in MODULES and training_program("nbtoolkit.tasks.grpo.train")
    assert (
        problems(
            lambda module, target: (
                training_program(module) and any(within(target, other) for other in (*TRAINING_PROGRAM_IGNORES, *VIEWS))
            )
        )
        == []
    )


@pytest.mark.parametrize(
    "source, found",
    [
        ("from nbtoolkit.backends.sagemaker import job\n", {"nbtoolkit.backends.sagemaker.job"}),
        ("from nbtoolkit.backends.sagemaker import LaunchError\n", {"nbtoolkit.backends.sagemaker"}),
        ("def later():\n    from nbtoolkit.notebook.charts import live_chart\n", {"nbtoolkit.notebook.charts"}),
        ("import nbtoolkit.runner.store as store\n", {"nbtoolkit.runner.store"}),
        ("from ..backends import program\n", {"nbtoolkit.backends.program"}),
    ],
)
def test_imports_are_found_also_inside_functions_and_relative(source, found):
    assert imported(PACKAGE / "metrics" / "series.py", source) == found


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One circle of imports through each group of modules that reach each other (Tarjan's strongly
    connected components), as a path that ends where it starts; a module importing itself is one too."""
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[set[str]] = []

    def visit(module: str) -> None:
        order[module] = low[module] = len(order)
        stack.append(module)
        for target in sorted(graph.get(module, ())):
            if target not in order:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], order[target])
        if low[module] == order[module]:
            group = set()
            while not group or module not in group:
                group.add(stack.pop())
            if len(group) > 1 or module in graph.get(module, ()):
                groups.append(group)

    for module in sorted(graph):
        if module not in order:
            visit(module)
    return [circle_through(graph, group) for group in groups]


def circle_through(graph: dict[str, set[str]], group: set[str]) -> list[str]:
    """The shortest circle from the group's first module back to itself, inside the group (breadth first)."""
    start = min(group)
    paths = {target: [start, target] for target in sorted(graph[start]) if target in group}
    while start not in paths:
        paths = {
            target: [*path, target]
            for path in paths.values()
            for target in sorted(graph[path[-1]])
            if target in group and target not in path[1:]
        } | paths
    return paths[start]


def test_no_nbtoolkit_modules_import_each_other_in_a_circle():
    found = cycles(with_packages(RUN_TIME_IMPORTS))
    assert found == [], "import circles (break them by design: one way between modules):\n" + "\n".join(
        " -> ".join(circle) for circle in found
    )


@pytest.mark.parametrize(
    "graph, found",
    [
        ({"a": {"b"}, "b": {"c"}, "c": set()}, []),
        ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, [["a", "b", "c", "a"]]),
        ({"a": {"a"}}, [["a", "a"]]),
        ({"a": {"b"}, "b": {"a"}, "c": {"d"}, "d": {"c"}}, [["a", "b", "a"], ["c", "d", "c"]]),
    ],
)
def test_circles_are_found_and_named(graph, found):
    assert sorted(cycles(graph)) == found


def test_an_import_under_type_checking_is_no_circle_but_one_in_a_function_is():
    source = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from nbtoolkit.spec import RunSpec\n"
    assert imported(PACKAGE / "metrics" / "series.py", source, run_time_only=True) == set()
    assert imported(PACKAGE / "metrics" / "series.py", source) == {"nbtoolkit.spec"}
    later = "def later():\n    from nbtoolkit.spec import RunSpec\n"
    assert imported(PACKAGE / "metrics" / "series.py", later, run_time_only=True) == {"nbtoolkit.spec"}


def test_a_circle_through_a_packages_init_is_found_but_a_package_importing_its_own_modules_is_none():
    """x imports a.b.c, which runs a.b's __init__.py first, and that imports x: a circle no plain edge shows."""
    through_init = {"nbtoolkit.x": {"nbtoolkit.a.b.c"}, "nbtoolkit.a.b": {"nbtoolkit.x"}, "nbtoolkit.a.b.c": set()}
    assert cycles(through_init) == []
    assert cycles(with_packages(through_init)) == [["nbtoolkit.a.b", "nbtoolkit.x", "nbtoolkit.a.b"]]
    own = {
        "nbtoolkit.a": {"nbtoolkit.a.b", "nbtoolkit.a.c"},
        "nbtoolkit.a.b": {"nbtoolkit.a.c"},
        "nbtoolkit.a.c": set(),
    }
    assert cycles(with_packages(own)) == []


def test_import_module_with_a_literal_name_counts_and_only_typings_type_checking_guards():
    dynamic = "import importlib\n\ndef later():\n    return importlib.import_module('nbtoolkit.spec')\n"
    assert imported(PACKAGE / "metrics" / "series.py", dynamic, run_time_only=True) == {"nbtoolkit.spec"}
    fake_guard = "TYPE_CHECKING = True\nif TYPE_CHECKING:\n    from nbtoolkit.spec import RunSpec\n"
    assert imported(PACKAGE / "metrics" / "series.py", fake_guard, run_time_only=True) == {"nbtoolkit.spec"}
    aliased = "import typing as t\nif t.TYPE_CHECKING:\n    from nbtoolkit.spec import RunSpec\n"
    assert imported(PACKAGE / "metrics" / "series.py", aliased, run_time_only=True) == set()
