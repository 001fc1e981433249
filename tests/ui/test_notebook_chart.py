"""A job's chart in a real notebook in JupyterLab (headless Chromium) is drawn by the browser: the same
component as the panel's detail view, following the job through the REST API, with the same points; the
saved notebook keeps the final image for front ends without the extension."""

from __future__ import annotations

import base64

import nbformat
from playwright.sync_api import Page, expect

from nbtoolkit.api import launch
from nbtoolkit.notebook.browser_chart import JOB_MIME
from nbtoolkit.runner import JobStore
from tests.conftest import SCRIPTS
from tests.ui.conftest import run_first_cell, write_notebook
from tests.ui.test_jobs_panel import open_panel, row_of

PNG = b"\x89PNG\r\n\x1a\n"
# a real (tiny) Trainer run held to 0.5 s a step: about 40 s of logging every 4 steps, eval at steps 40 and 80
PACED = {
    "task": "text-classification",
    "name": "ui-charted",
    "script": {
        "path": str(SCRIPTS / "hf_style_train.py"),
        "args": ["--max_steps", "80", "--logging_steps", "4", "--step_seconds", "0.5"],
    },
}
TRAIN_LINE = 'polyline.nbt-JobChart-line[data-series="train loss"]'
EVAL_LINE = 'polyline.nbt-JobChart-line[data-series="eval loss"]'


def steps_of(chart) -> list[int]:
    steps = chart.locator(TRAIN_LINE).get_attribute("data-steps", timeout=5_000)
    return [int(step) for step in steps.split(",")] if steps else []


def test_a_notebook_chart_and_the_panel_draw_the_same_points_and_the_saved_notebook_keeps_the_image(
    lab, page: Page, console_errors, screenshot
):
    write_notebook(lab.root_dir / "chart.ipynb", "from nbtoolkit.api import jobs", "chart = jobs()[0].chart()")
    page.goto(lab.tree("chart.ipynb"))
    run_first_cell(page)  # the kernel is up: the job starts now, and its chart is shown while it runs
    job = launch(PACED, store=JobStore(lab.home))
    page.keyboard.press("Shift+Enter")

    notebook_chart = page.locator(".jp-Notebook .nbt-JobChartOutput")
    expect(notebook_chart.locator(TRAIN_LINE)).to_be_visible(timeout=180_000)
    expect(notebook_chart.locator(".nbt-JobChartOutput-job")).to_contain_text(f"ui-charted · {job.id} · running")
    early = steps_of(notebook_chart)
    # the browser follows the running job: more points arrive while the kernel sends nothing
    page.wait_for_function(
        "([selector, count]) => { const line = document.querySelector(selector);"
        " return line && line.dataset.steps.split(',').length > count; }",
        arg=[f".jp-Notebook .nbt-JobChartOutput {TRAIN_LINE}", len(early)],
        timeout=120_000,
    )
    assert job.status == "running", "the job ended before the chart grew: make it longer"
    screenshot("notebook-chart-running")

    open_panel(page)
    row_of(page, job).locator(".nbt-JobRow-name").click()
    detail = page.locator(f"#nbtoolkit-job-{job.id}")
    expect(detail.locator(".nbt-JobChart " + TRAIN_LINE)).to_be_visible(timeout=60_000)

    assert job.wait(timeout=300) == "succeeded", job.logs(tail=20)
    logged = [record["step"] for record in job.records() if record.get("kind") == "train" and "loss" in record]
    evaluated = [record["step"] for record in job.records() if record.get("kind") == "eval" and "eval_loss" in record]
    assert len(logged) == 20 and evaluated == [40, 80]
    expect(detail.locator(".nbt-JobRow-status")).to_have_text("succeeded", timeout=60_000)
    expect(notebook_chart.locator(".nbt-JobChartOutput-job")).to_contain_text("succeeded", timeout=60_000)
    for chart in (notebook_chart, detail):  # both read every record: train loss every 4 steps, eval twice
        expect(chart.locator(TRAIN_LINE)).to_have_attribute("data-steps", ",".join(map(str, logged)), timeout=30_000)
        expect(chart.locator(EVAL_LINE)).to_have_attribute("data-steps", "40,80")
    # one component, the same size: the very same points on screen
    assert notebook_chart.locator(TRAIN_LINE).get_attribute("points") == detail.locator(TRAIN_LINE).get_attribute(
        "points"
    )
    assert len(notebook_chart.locator(TRAIN_LINE).get_attribute("points").split()) == 20

    # the kernel's one update at the end put the final image in the notebook: save it, read the file
    page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab", has_text="chart.ipynb").click()
    page.locator(".jp-NotebookPanel .jp-Cell").first.click()
    page.keyboard.press("Control+s")
    (output,) = [
        output
        for output in wait_saved(lab.root_dir / "chart.ipynb", page).cells[1].outputs
        if output.output_type == "display_data"
    ]
    assert output.data[JOB_MIME]["job_ids"] == [job.id]
    assert base64.b64decode(output.data["image/png"]).startswith(PNG)
    assert "succeeded · step 80/80 (100%)" in output.data["text/plain"]
    screenshot("notebook-chart-and-detail")
    assert console_errors == []


def wait_saved(path, page: Page, timeout_ms: int = 30_000) -> nbformat.NotebookNode:
    """The notebook as saved, once the save holds the final image (the kernel's update may trail the page)."""
    waited = 0
    while True:
        notebook = nbformat.read(path, as_version=4)
        outputs = notebook.cells[1].outputs
        if (
            any("succeeded" in output.get("data", {}).get("text/plain", "") for output in outputs)
            or waited >= timeout_ms
        ):
            return notebook
        page.wait_for_timeout(1_000)
        waited += 1_000
        page.keyboard.press("Control+s")
