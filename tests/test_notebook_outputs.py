"""The example notebooks are committed executed (charts visible on GitHub) from the code they hold."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from tools.execute_notebooks import NOTEBOOKS, code_hash

EXAMPLES = sorted(NOTEBOOKS.glob("*.ipynb"))


@pytest.mark.parametrize("path", EXAMPLES, ids=[path.stem for path in EXAMPLES])
def test_notebook_is_saved_executed_from_its_current_code(path: Path):
    notebook = nbformat.read(path, as_version=4)
    code_cells = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert all(cell.execution_count for cell in code_cells), f"{path.name}: run `make notebooks`"
    assert not any(output.output_type == "error" for cell in code_cells for output in cell.outputs)
    assert notebook.metadata.get("nbtoolkit", {}).get("code_sha256") == code_hash(notebook), (
        f"{path.name} changed since its outputs were saved: run `make notebooks`"
    )


def test_every_notebook_shows_a_picture_or_a_table():
    """A tutorial that prints nothing visual teaches nothing on GitHub."""
    for path in EXAMPLES:
        notebook = nbformat.read(path, as_version=4)
        kinds = {
            key
            for cell in notebook.cells
            if cell.cell_type == "code"
            for output in cell.outputs
            for key in output.get("data", {})
        }
        assert kinds & {"image/png", "text/html"}, path.name


def test_the_chat_notebook_says_its_smoke_rates_are_smoke_only_and_its_last_reply_is_reward_hacked():
    """Its smoke learning rates would wreck a real model, and it ends on a reply GRPO's digit reward hacked: its text
    says both, quoting the reply the saved run gave."""
    notebook = nbformat.read(NOTEBOOKS / "chat-sft-dpo-grpo.ipynb", as_version=4)
    config = next(cell.source for cell in notebook.cells if cell.source.startswith("## Configuration"))
    assert "smoke learning rates are for smoke mode only" in config
    last, reply = notebook.cells[-1], notebook.cells[-2]
    assert last.cell_type == "markdown" and "reward hacking" in last.source
    saved = "".join(output.get("data", {}).get("text/plain", "") for output in reply.outputs)
    assert "'reply': ' 7 7 7" in saved and '"7 7 7 ..."' in last.source
