"""The core knows no task by name: outside its own folder (nbtoolkit/tasks/<task>/) no module of nbtoolkit compares a
task with a task's name, names a task in a table keyed by task, picks a task's entry by name, or imports a task's
folder. It asks a task's fields (nbtoolkit/tasks/__init__.py: Task) instead, so a task is added or removed with its
folder and its entry point alone. Read from the source (AST), with the task names and folders of pyproject.toml's
entry points: no import of nbtoolkit, well under a second."""

from __future__ import annotations

import ast

import pytest
import tomllib

from tests.test_layering import PACKAGE, imported, module_name, within

PYPROJECT = PACKAGE.parent / "pyproject.toml"
#: nbtoolkit's own tasks: name -> its folder's package (the entry point's module)
TASK_PACKAGES = {
    name: value.partition(":")[0]
    for name, value in tomllib.loads(PYPROJECT.read_text())["project"]["entry-points"]["nbtoolkit.tasks"].items()
}
TASK_NAMES = tuple(TASK_PACKAGES)
REGISTRY = "nbtoolkit.tasks"

#: (file, what is found) -> why it may name a task; keep it short: fix a real branch by adding a field to Task
ALLOWED = {
    ("nbtoolkit/cli.py", "a spec of a named task"): "`nbtoolkit demo`'s specs: the emotion tutorial's classification",
    ("nbtoolkit/planner/report.py", "a spec of a named task"): "the T5 tutorial's summarization plan, an example",
    ("nbtoolkit/planner/chat_report.py", "a spec of a named task"): "the SFT/DPO/GRPO plan table's example specs",
    ("nbtoolkit/planner/adapter_report.py", "a spec of a named task"): "the LoRA/QLoRA plan table's example spec",
    ("nbtoolkit/train/pairing.py", "a table keyed by task"): "keyed by Task.head: two heads share a task's name",
}


def is_task(node: ast.AST) -> bool:
    """`task`, or an attribute `.task` (`spec.task`, `record.task`, ...)."""
    return (isinstance(node, ast.Name) and node.id == "task") or (
        isinstance(node, ast.Attribute) and node.attr == "task"
    )


def names_a_task(node: ast.AST | None, names: tuple[str, ...]) -> bool:
    """A task's name as a literal, or a tuple, list or set holding one."""
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return any(names_a_task(item, names) for item in node.elts)
    return isinstance(node, ast.Constant) and node.value in names


def task_name_uses(source: str, names: tuple[str, ...]) -> list[tuple[str, str]]:
    """(what is found, `line: source`) for each place the source knows a task by its name."""
    found = []
    for node in ast.walk(ast.parse(source)):
        sides = [node.left, *node.comparators] if isinstance(node, ast.Compare) else []
        if any(is_task(side) for side in sides) and any(names_a_task(side, names) for side in sides):
            found.append(("a comparison with a task's name", node))
        elif isinstance(node, ast.Match) and is_task(node.subject):
            found += [
                ("a comparison with a task's name", case.pattern)
                for case in node.cases
                if any(names_a_task(getattr(pattern, "value", None), names) for pattern in ast.walk(case.pattern))
            ]
        elif isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == "TASKS":
            if names_a_task(node.slice, names):
                found.append(("a task's entry picked by name", node))
        elif isinstance(node, ast.Dict):
            keys = [key for key in node.keys if names_a_task(key, names)]
            if len(keys) >= 2:
                found.append(("a table keyed by task", node))
            named = [value for key, value in zip(node.keys, node.values, strict=True) if _is(key, "task")]
            if any(names_a_task(value, names) for value in named):
                found.append(("a spec of a named task", node))
        elif isinstance(node, ast.Call) and any(
            keyword.arg == "task" and names_a_task(keyword.value, names) for keyword in node.keywords
        ):
            found.append(("a spec of a named task", node))
    return [(what, f"{node.lineno}: {ast.unparse(node).splitlines()[0]}") for what, node in found]


def _is(node: ast.AST | None, text: str) -> bool:
    return isinstance(node, ast.Constant) and node.value == text


def folder_of(module: str) -> str | None:
    """The task package a module belongs to (nbtoolkit.tasks.<folder>), or None for the core and the registry."""
    parts = module.split(".")
    return ".".join(parts[:3]) if within(module, REGISTRY) and len(parts) > 2 else None


#: the core's and the registry's modules: every module of nbtoolkit outside nbtoolkit/tasks/<folder>/
OUTSIDE_THE_TASKS = [path for path in sorted(PACKAGE.rglob("*.py")) if folder_of(module_name(path)) is None]
#: (file, what is found, `line: source`) for each place outside the tasks that names a task
USES = [
    (str(path.relative_to(PACKAGE.parent)), what, line)
    for path in OUTSIDE_THE_TASKS
    for what, line in task_name_uses(path.read_text(), TASK_NAMES)
]


def test_no_module_outside_a_tasks_folder_knows_a_task_by_its_name():
    found = [f"{file}:{line} ({what})" for file, what, line in USES if (file, what) not in ALLOWED]
    assert found == [], "read a field of the task (add one to Task) instead:\n" + "\n".join(found)


def test_each_exception_is_still_there():
    """An exception the code no longer needs is taken out of ALLOWED, so the list stays the true one."""
    assert set(ALLOWED) <= {(file, what) for file, what, _ in USES}


def test_no_module_outside_a_tasks_folder_imports_the_folder():
    """The core reaches a task through the registry's hooks (`module:function` facts, imported as they run), never by
    importing its folder; a task may build on another's (vision-chat on chat's training setup)."""
    assert set(TASK_PACKAGES.values()) >= {"nbtoolkit.tasks.vision_chat", "nbtoolkit.tasks.reward_model"}
    found = [
        f"{module_name(path)} imports {target}"
        for path in OUTSIDE_THE_TASKS
        for target in sorted(imported(path))
        if folder_of(target) is not None
    ]
    assert found == []


#: (task folder, the task folder it imports) -> why it builds on that task; a task added alone (vision-chat,
#: reward-model) imports none, so it is removed with its folder alone
BUILDS_ON = {
    ("nbtoolkit.tasks.preference", "nbtoolkit.tasks.chat"): "a chat model's facts (CHAT_MODEL); it answers with chat's",
    ("nbtoolkit.tasks.grpo", "nbtoolkit.tasks.chat"): "a chat model's facts (CHAT_MODEL); it answers with chat's",
}


def test_a_task_folder_imports_another_only_where_it_builds_on_that_task():
    found = {
        (mine, theirs)
        for path in sorted(PACKAGE.rglob("*.py"))
        if (mine := folder_of(module_name(path))) is not None
        for target in imported(path)
        if (theirs := folder_of(target)) not in (None, mine)
    }
    assert found == set(BUILDS_ON)


@pytest.mark.parametrize(
    "source, found",
    [
        ('if spec.task == "grpo":\n    pass\n', [("a comparison with a task's name", "1: spec.task == 'grpo'")]),
        (
            'x = task in ("chat", "preference")\n',
            [("a comparison with a task's name", "1: task in ('chat', 'preference')")],
        ),
        (
            'x = "summarization" != self.task\n',
            [("a comparison with a task's name", "1: 'summarization' != self.task")],
        ),
        ('match spec.task:\n    case "chat":\n        pass\n', [("a comparison with a task's name", "2: 'chat'")]),
        ('x = TASKS["grpo"].head\n', [("a task's entry picked by name", "1: TASKS['grpo']")]),
        (
            'LIMIT = {"chat": 1, "grpo": 2}[spec.task]\n',
            [("a table keyed by task", "1: {'chat': 1, 'grpo': 2}")],
        ),
        (
            'EXAMPLE = {"task": "chat", "model": "m"}\n',
            [("a spec of a named task", "1: {'task': 'chat', 'model': 'm'}")],
        ),
        ('spec = RunSpec(task="grpo")\n', [("a spec of a named task", "1: RunSpec(task='grpo')")]),
        ("x = record.task == SERVE_TASK\n", []),
        ('x = TASKS[task].try_it == "chat"\n', []),
        ('x = spec.model == "grpo"\n', []),
        ('x = {"chat": 1, "other": 2}\n', []),
    ],
)
def test_each_way_of_naming_a_task_is_found(source, found):
    assert task_name_uses(source, ("chat", "preference", "grpo", "summarization")) == found


@pytest.mark.parametrize(
    "module, folder",
    [
        ("nbtoolkit.tasks.vision_chat.train", "nbtoolkit.tasks.vision_chat"),
        ("nbtoolkit.tasks.chat", "nbtoolkit.tasks.chat"),
        ("nbtoolkit.tasks", None),
        ("nbtoolkit.planner.shapes", None),
    ],
)
def test_a_module_belongs_to_the_task_folder_it_is_in(module, folder):
    assert folder_of(module) == folder
