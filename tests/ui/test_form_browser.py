"""The form in a real JupyterLab, in headless Chromium: it renders, reacts to edits, logs no errors."""

from __future__ import annotations

import nbformat
from nbformat.v4 import new_code_cell, new_notebook


def write_notebook(path, *sources: str) -> None:
    nbformat.write(new_notebook(cells=[new_code_cell(source) for source in sources], metadata={
        "kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}}), path)


def test_the_form_renders_and_follows_edits(lab, page, console_errors, screenshot):
    write_notebook(lab.root_dir / "form.ipynb", "%load_ext nbtoolkit",
                   "%finetune --form --task text-classification --steps 5")
    page.goto(lab.tree("form.ipynb"))
    page.locator(".jp-Notebook .jp-Cell").first.click()
    page.keyboard.press("Shift+Enter")
    page.keyboard.press("Shift+Enter")
    form = page.locator(".nbtoolkit-form")
    form.wait_for(state="visible", timeout=120_000)
    yaml_tab = form.locator(".widget-tab .widget-html").first
    assert "max_steps: 5" in yaml_tab.inner_text()
    assert page.locator(".nbtoolkit-field-parallelism-zero-stage").count() == 0

    page.locator(".nbtoolkit-field-parallelism-strategy select").select_option(label="deepspeed")
    page.locator(".nbtoolkit-field-parallelism-zero-stage").wait_for(state="visible")
    page.wait_for_function("() => document.querySelector('.nbtoolkit-form .widget-tab .widget-html')"
                           ".innerText.includes('strategy: deepspeed')")

    steps = page.locator(".nbtoolkit-field-train-max-steps input")
    steps.fill("ten")  # validated as typed: the spec's sentence appears next to the field
    form.get_by_text("train.max_steps: 'ten' is not valid").first.wait_for(state="visible")
    steps.fill("12")
    page.wait_for_function("() => document.querySelector('.nbtoolkit-form .widget-tab .widget-html')"
                           ".innerText.includes('max_steps: 12')")
    assert form.get_by_role("button", name="Launch").is_enabled()
    assert screenshot("form").stat().st_size > 10_000
    assert console_errors == []
