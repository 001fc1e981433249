"""User text inside generated files (run.sh, the exported SageMaker scripts) as data, never as code.

Values are quoted by the file's own rules (`shlex.quote` for bash, `repr` for Python); text in a
comment is made one printable line, so a newline in a spec value cannot start a statement.
"""

from __future__ import annotations


def one_line(text: str) -> str:
    """`text` with line breaks and other control characters written as escapes (`\\n`, `\\x1b`)."""
    return "".join(char if char.isprintable() else char.encode("unicode_escape").decode("ascii") for char in text)


def comment(text: str) -> str:
    """A `#` comment line (bash and Python) that says `text` and nothing more."""
    return f"# {one_line(text)}"


def python_replace(text: str, placeholder: str, variable: str) -> str:
    """A Python expression for `text` with `placeholder` replaced by the value of `variable` when it runs:
    a literal and `str.replace`, not an f-string, so braces in `text` stay text."""
    return f"{text!r}.replace({placeholder!r}, {variable})"
