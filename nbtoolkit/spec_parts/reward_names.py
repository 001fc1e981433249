"""What the spec checks about reward functions without shipping or loading any: which rewards a grpo run
scores by default, and the names a reward's source text defines. Apart from `nbtoolkit.rewards`, which
ships and loads functions and needs the spec, so the spec can read these one way.
"""

from __future__ import annotations

import ast
import re

#: what a grpo run on the bundled prompts scores when the spec names no reward
BUNDLED_REWARDS = ("nbtoolkit.rewards:correct_answer", "nbtoolkit.rewards:number_reply")


#: what `module:function`'s module must be: a dotted module name, as importlib.import_module takes it (a relative
#: name such as `..x` or a path wants a package, and failed in the job with TypeError "the 'package' argument is
#: required")
MODULE_NAME = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")


def reference_problem(reference: str) -> str | None:
    """What is wrong with a `module:function` or `path/to/file.py:function` reference, as one sentence; None if
    nothing is. Only its form is checked: the module or file is imported or read at launch."""
    where, _, name = reference.rpartition(":")
    valid = "write module:function or path/to/file.py:function"
    if not where or not name:
        return f"reward.functions {reference!r} names no function; {valid}"
    if not where.endswith(".py") and not MODULE_NAME.fullmatch(where):
        return (
            f"reward.functions {reference!r}: {where!r} is neither a dotted module name (package.module) nor a file "
            f"ending in .py; {valid}"
        )
    if not name.isidentifier():
        return f"reward.functions {reference!r}: {name!r} is not a Python function name; {valid}"
    return None


class NotPython(ValueError):
    """A reward's source that does not parse; the message is one sentence."""


def defined_names(source: str, what: str) -> set[str]:
    """The names a module's text binds at its top level (functions, and plain or annotated assignments)."""
    try:
        body = ast.parse(source).body
    except SyntaxError as exc:
        raise NotPython(f"{what} is not valid Python (line {exc.lineno}: {exc.msg})") from None
    names: set[str] = set()
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        targets = (
            node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        )
        names |= {target.id for target in targets if isinstance(target, ast.Name)}
    return names
