"""What the spec checks about reward functions without shipping or loading any: which rewards a grpo run
scores by default, and the names a reward's source text defines. Apart from `nbtoolkit.rewards`, which
ships and loads functions and needs the spec, so the spec can read these one way.
"""

from __future__ import annotations

import ast

#: what a grpo run on the bundled prompts scores when the spec names no reward
BUNDLED_REWARDS = ("nbtoolkit.rewards:correct_answer", "nbtoolkit.rewards:number_reply")


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
