"""The house rules `make lint` runs first in `make test` find what they are there to find: each tool, with
the project's own configuration, fails on a deliberately bad file (the circles: tests/test_layering.py).
ESLint is left out here: its type-aware pass builds the panel's whole TypeScript program (5 s of CPU)."""

from __future__ import annotations

import io
import os
import re
import subprocess
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = ROOT / ".venv" / "bin"
LAB = ROOT / "labextension"


def run(argv: list[str | Path], cwd: Path = ROOT, stdin: str | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}  # node comes with the venv, as make has it
    return subprocess.run(
        [str(arg) for arg in argv], cwd=cwd, input=stdin, env=env, capture_output=True, text=True, timeout=120
    )


def test_ruff_finds_unsorted_imports_and_a_zip_without_strict(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import sys\nimport os\n\nprint(list(zip(os.sep, sys.argv)))\n")
    done = run([BIN / "ruff", "check", "--config", ROOT / "pyproject.toml", bad])
    assert done.returncode == 1
    assert "I001" in done.stdout and "B905" in done.stdout


def test_ruff_format_check_finds_a_file_it_would_reformat(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("x = {'a':1}\n")
    done = run([BIN / "ruff", "format", "--check", "--config", ROOT / "pyproject.toml", bad])
    assert done.returncode == 1
    assert "1 file would be reformatted" in done.stdout


def test_mypy_finds_a_type_error_with_the_projects_settings(tmp_path):
    """The project's [tool.mypy] (its plugin, its error codes): an int returned as text, a bare ignore, and an error
    inside a function without annotations (check_untyped_defs)."""
    bad = tmp_path / "bad.py"
    bad.write_text(
        "def name(count: int) -> str:\n    return count\n\n\nx: int = 'one'  # type: ignore\n\n\ndef untyped():\n    return 1 + 'a'\n"
    )
    done = run([BIN / "mypy", "--config-file", ROOT / "pyproject.toml", "--cache-dir", tmp_path / "cache", bad])
    assert done.returncode == 1
    assert 'Incompatible return value type (got "int", expected "str")  [return-value]' in done.stdout
    assert '"type: ignore" comment without error code' in done.stdout
    assert 'Unsupported operand types for + ("int" and "str")' in done.stdout


def test_prettier_rewrites_what_the_panels_style_does_not_allow():
    """`jlpm prettier:check` fails on any file prettier would change; the panel's config wants single quotes."""
    source = 'export const greeting = "hello"\n'
    done = run([LAB / "node_modules" / ".bin" / "prettier", "--stdin-filepath", "src/greeting.ts"], LAB, source)
    assert done.returncode == 0
    assert done.stdout == "export const greeting = 'hello';\n"


#: a blanket ignore (a whole file, or a line without its reason): mypy's and ruff's file-level switches, a
#: `type: ignore[code]` or `noqa: CODE` with nothing after it
BLANKET = re.compile(
    r"#\s*mypy:\s*ignore-errors|#\s*ruff\s*:\s*noqa|type:\s*ignore(\[[^]]*\])?\s*$|noqa(:\s*[A-Z]+[0-9]+(,\s*[A-Z]+[0-9]+)*)?\s*$"
)


def blanket_ignores(source: str) -> list[str]:
    """The comments of `source` (read as Python tokens, so a string that holds one does not count) that ignore
    without saying why."""
    return [
        token.string
        for token in tokenize.generate_tokens(io.StringIO(source).readline)
        if token.type == tokenize.COMMENT and BLANKET.search(token.string)
    ]


def test_no_blanket_ignores_and_every_ignore_says_why():
    found = [
        f"{path.relative_to(ROOT)}: {comment}"
        for folder in ("nbtoolkit", "tests", "benchmarks", "tools")
        for path in sorted((ROOT / folder).rglob("*.py"))
        for comment in blanket_ignores(path.read_text())
    ]
    assert found == [], "say why after the ignore (`# type: ignore[code]  # why`):\n" + "\n".join(found)


def test_blanket_ignores_are_found():
    bad = [
        "# mypy: ignore-errors\n",
        "# ruff: noqa\n",
        "x = 1  # type: ignore[assignment]\n",
        "x = 1  # type: ignore\n",
        "import os  # noqa: F401\n",
    ]
    assert [len(blanket_ignores(source)) for source in bad] == [1] * len(bad)
    good = "x = 1  # type: ignore[assignment]  # why\nimport os  # noqa: F401 - why\ns = '# ruff: noqa'\n"
    assert blanket_ignores(good) == []
