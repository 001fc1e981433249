"""The docs site: its reference pages list what the code defines (every field of every spec block, the
command's help) and its nav names every page in docs/. `make docs-build` builds it strict in `make test`."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import yaml

from nbtoolkit.spec import RunSpec
from tools.docs_reference import cli_reference, spec_reference

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"


def sections(page: str) -> dict[str, set[str]]:
    """Each `## heading` of a reference page -> the field names of its table's rows."""
    found: dict[str, set[str]] = {}
    heading = None
    for line in page.splitlines():
        if line.startswith("## "):
            heading = line[3:].strip()
            found[heading] = set()
        elif heading is not None and (row := re.match(r"\| `([^`]+)` \|", line)):
            found[heading].add(row.group(1))
    return found


def test_the_spec_reference_lists_every_field_of_every_block_the_schema_has():
    """Read apart from the generator, from pydantic's JSON schema: the spec's own fields and each block's
    (a backend's included) are the rows of one section of the page."""
    schema = RunSpec.model_json_schema()
    models = {"RunSpec": schema, **schema["$defs"]}
    listed = sections(spec_reference())
    assert listed["Top level"] == set(schema["properties"])
    for name, model in models.items():
        if "properties" in model:
            assert set(model["properties"]) in listed.values(), f"{name}'s fields are missing from the spec reference"
    for block in ("dataset", "train", "sagemaker", "slurm", "skypilot", "skypilot.fallbacks"):
        assert f"`{block}:`" in listed


def test_every_field_of_every_block_has_a_description():
    """Read from the schema too: a row of the reference with an empty description tells a reader nothing."""
    schema = RunSpec.model_json_schema()
    models = {"RunSpec": schema, **schema["$defs"]}
    empty = [
        f"{name}.{field}"
        for name, model in models.items()
        for field, about in model.get("properties", {}).items()
        if not about.get("description", "").strip()
    ]
    assert empty == [], "give these fields a description (Field(description=...)): " + ", ".join(empty)


def test_the_cli_reference_is_the_commands_own_help():
    """`nbtoolkit --help` and a command's help, as the command prints them, are on the page."""
    env = {**os.environ, "COLUMNS": "100"}
    page = cli_reference()
    for argv in ([], ["run"]):
        shown = subprocess.run(
            [sys.executable, "-m", "nbtoolkit.cli", *argv, "--help"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert shown.returncode == 0, shown.stderr
        assert shown.stdout.rstrip() in page
    for name in ("run", "plan", "jobs", "show", "logs", "stop", "export", "launch-files", "resume", "fork"):
        assert f"\n## nbtoolkit {name}\n" in page


def test_the_nav_names_every_page_and_only_pages_that_exist():
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text().replace("!!python", "#"))

    def pages(entries) -> list[str]:
        found = []
        for entry in entries:
            value = next(iter(entry.values())) if isinstance(entry, dict) else entry
            found += pages(value) if isinstance(value, list) else [value]
        return found

    named = pages(config["nav"])
    generated = {"reference/spec.md", "reference/cli.md"}
    on_disk = {str(path.relative_to(DOCS)) for path in DOCS.rglob("*.md")}
    assert on_disk - set(named) == set(), "add these pages to the nav of mkdocs.yml"
    assert sorted(page for page in set(named) if named.count(page) > 1) == [], "list each page once in the nav"
    assert set(named) - on_disk - generated == set()


def docs_build(root: Path) -> subprocess.CompletedProcess:
    """The Makefile's own `docs-build` recipe, run in `root`."""
    recipe = re.search(r"^docs-build:.*\n\t(.+)$", (ROOT / "Makefile").read_text(), re.MULTILINE)
    assert recipe is not None
    command = recipe.group(1).replace("$(BIN)", str(ROOT / ".venv" / "bin"))
    return subprocess.run(command, shell=True, cwd=root, capture_output=True, text=True, timeout=120)


def test_docs_build_fails_on_a_broken_link(tmp_path):
    """Strict in effect: a link to a page or an anchor that does not exist fails `make docs-build` (a warning
    under --quiet was not counted). A one-page site with the real settings, less the reference hook, to stay
    quick; the real tree is built by `make docs-build` itself."""
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    del config["hooks"]
    config["nav"] = ["index.md"]
    (tmp_path / "mkdocs.yml").write_text(yaml.safe_dump(config))
    (tmp_path / "docs").mkdir()
    page = tmp_path / "docs" / "index.md"
    page.write_text("# nbtoolkit\n\nSee [the quickstart](#quickstart).\n\n## Quickstart\n")
    built = docs_build(tmp_path)
    assert built.returncode == 0, built.stderr
    page.write_text("# nbtoolkit\n\nSee [the quickstart](quickstart.md) and [the end](#the-end).\n")
    broken = docs_build(tmp_path)
    assert broken.returncode == 1
    assert "'quickstart.md'" in broken.stderr and "'#the-end'" in broken.stderr
