"""Each example's real launch is its tutorial's: every hyperparameter and launch fact of the tutorial (and the
scripts it ran), listed in tests/tutorials/<golden>.yaml with where it stands, is checked against the golden
launch. A fact that differs is a row with its reason, and the example notebook names it."""

from __future__ import annotations

import json
from typing import Any

import nbformat
import pytest
import yaml

from nbtoolkit.hardware import catalog
from tests.real_launches import GOLDEN, ROOT

TABLES = {path.stem: yaml.safe_load(path.read_text()) for path in sorted((ROOT / "tests" / "tutorials").glob("*.yaml"))}
#: the specs of notebooks/specs/ that reproduce a tutorial's run
TUTORIAL_RUNS = (
    "bert-emotion-trainium",
    "bert-qa-sagemaker",
    "flan-t5-xxl",
    "gpt2-wikitext-sagemaker",
    "gpt2-wikitext-sagemaker-torch.compile",
    "t5-large-trainium",
    "t5-small-trainium",
)
ROW_KEYS = {"fact", "tutorial", "where", "golden", "ours", "deviation", "as"}
#: how a row reads its golden value: a number as an int, an instance type as its vCPUs (the map workers of
#: nbtoolkit's data preparation), no evaluation split as the Trainer's eval_strategy "no"
AS = {
    "int": int,
    "vcpus": lambda instance: catalog.instance(instance).vcpus,
    "eval_strategy": lambda split: "no" if split is None else split,
}


def golden_value(golden: str, reference: str) -> Any:
    """`FILE:dotted.path` in a JSON golden file (list items by index), or `FILE~text`: whether the file holds it."""
    if "~" in reference:
        name, text = reference.split("~", 1)
        return text in (GOLDEN / golden / name).read_text()
    name, path = reference.split(":", 1)
    value: Any = json.loads((GOLDEN / golden / name).read_text())
    for key in path.split("."):
        value = value[int(key)] if isinstance(value, list) else (value or {}).get(key)
    return value


def test_every_tutorial_run_has_its_table():
    assert sorted(TABLES) == sorted(TUTORIAL_RUNS)
    for name, table in TABLES.items():
        assert table["golden"] == name and table["source"].startswith("https://") and len(table["rows"]) >= 10


@pytest.mark.parametrize("name", sorted(TABLES))
def test_every_tutorial_fact_is_the_goldens_or_a_deviation_with_its_reason(name):
    wrong = []
    for row in TABLES[name]["rows"]:
        assert set(row) <= ROW_KEYS and {"fact", "tutorial", "where", "golden"} <= set(row), row
        actual = golden_value(name, row["golden"])
        if "as" in row:
            actual = AS[row["as"]](actual)
        if "deviation" in row:
            assert row["ours"] != row["tutorial"] and len(row["deviation"]) > 40, row["fact"]
            expected = row["ours"]
        else:
            assert "ours" not in row, f"{row['fact']}: a value of ours that differs needs its deviation"
            expected = row["tutorial"]
        if actual != expected:
            wrong.append(f"{row['fact']}: golden {actual!r}, table {expected!r} ({row['where']})")
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("name", sorted(TABLES))
def test_the_notebook_says_every_deviation(name):
    table = TABLES[name]
    notebook = nbformat.read(ROOT / "notebooks" / table["notebook"], as_version=4)
    prose = "\n".join(cell.source for cell in notebook.cells if cell.cell_type == "markdown")
    unsaid = [row["fact"] for row in table["rows"] if "deviation" in row and row["fact"] not in prose]
    assert not unsaid, f"{table['notebook']} does not say where it differs from the tutorial: {unsaid}"
