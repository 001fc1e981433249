"""The job panel in a real JupyterLab in headless Chromium: a real training job goes from running
to succeeded with a sparkline; a second job is stopped from the panel and all its processes end."""

from __future__ import annotations

import json
import re
import time

import psutil
from playwright.sync_api import Page, expect

from nbtoolkit.api import Job, launch
from nbtoolkit.runner import JobStore
from tests.conftest import SCRIPTS
from tests.ui.conftest import SCREENSHOTS

TINY = {
    "task": "text-classification",
    "name": "ui-tiny-bert",
    "train": {"max_steps": 100, "batch_size": 4, "learning_rate": 0.003, "logging_steps": 5},
}
SLEEPY = {"task": "text-classification", "name": "ui-sleepy", "script": {"path": str(SCRIPTS / "sleepy.py")}}


def open_panel(page: Page):
    """Click the panel's tab in the left sidebar; returns the panel."""
    panel = page.locator("#nbtoolkit-jobs")
    if not panel.is_visible():
        page.locator('.jp-SideBar.jp-mod-left [data-id="nbtoolkit-jobs"]').click()
    expect(panel).to_be_visible()
    return panel


def row_of(page: Page, job: Job):
    return page.locator(f'#nbtoolkit-jobs .nbt-JobRow[data-job-id="{job.id}"]')


def test_a_real_job_shows_running_then_succeeded_with_a_sparkline(lab, lab_page: Page):
    page = lab_page
    open_panel(page)
    job = launch(TINY, store=JobStore(lab.home))
    row = row_of(page, job)

    expect(row.locator(".nbt-JobRow-status")).to_have_text("running", timeout=60_000)
    expect(row.locator(".nbt-JobRow-launcher")).to_have_text("local")
    expect(row.locator(".nbt-Progress-label")).to_have_text(re.compile(r"^\d+/100$"), timeout=120_000)
    page.screenshot(path=SCREENSHOTS / "panel-running.png")

    expect(row.locator(".nbt-JobRow-status")).to_have_text("succeeded", timeout=300_000)
    assert job.status == "succeeded", job.logs(tail=20)
    expect(row.locator(".nbt-Progress-label")).to_have_text("100/100")
    expect(row.locator(".nbt-JobRow-facts")).to_contain_text("loss ")
    expect(row.locator(".nbt-JobRow-facts")).to_contain_text("samples/s")
    points = row.locator("svg.nbt-Sparkline polyline").get_attribute("points").split()
    assert len(points) == 20  # one point per logged train loss (100 steps / 5)
    expect(row.locator('[title="Stop job"]')).to_have_count(0)
    page.screenshot(path=SCREENSHOTS / "panel-succeeded.png")

    # the detail view: larger loss and throughput charts, and the log to its end
    row.locator(".nbt-JobRow-name").click()
    view = page.locator(f"#nbtoolkit-job-{job.id}")
    log = view.locator(".nbt-LogTail")
    expect(log).to_contain_text("job succeeded", timeout=30_000)
    # one line per logging step (nbtoolkit's), values as numbers; the raw output holds the Trainer's dict too
    expect(log).to_contain_text("[nbtoolkit] step 100/100 (100%)")
    assert "{'loss'" not in log.text_content()
    view.locator(".nbt-LogTail-raw input").check()
    expect(log).to_contain_text("{'loss': '", timeout=30_000)
    charts = view.locator(".nbt-JobDetail-charts svg")
    expect(charts).to_have_count(2)
    train_loss = charts.nth(0).locator('polyline.nbt-JobChart-line[data-series="train loss"]')
    for line in (train_loss, charts.nth(1).locator("polyline")):
        assert len(line.get_attribute("points").split()) == 20
    page.screenshot(path=SCREENSHOTS / "job-detail.png")

    # a reload loses nothing: the panel's state comes from the server
    page.reload()
    page.wait_for_selector("#jp-main-dock-panel", state="visible", timeout=90_000)
    expect(row_of(page, job).locator(".nbt-JobRow-status")).to_have_text("succeeded", timeout=30_000)


def ready_pids(job: Job, timeout: float = 60.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for line in job.logs().splitlines():
            if line.startswith("ready pids"):
                return [int(pid) for pid in line.split()[2:]]
        time.sleep(0.2)
    raise AssertionError(f"the job never got ready:\n{job.logs(tail=20)}")


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def test_a_job_is_stopped_from_the_panel_and_its_processes_end(lab, page: Page):
    kernel = {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}
    (lab.root_dir / "scratch.ipynb").write_text(
        json.dumps({"cells": [], "metadata": kernel, "nbformat": 4, "nbformat_minor": 5})
    )
    job = launch(SLEEPY, store=JobStore(lab.home))
    pids = ready_pids(job)
    assert all(alive(pid) for pid in pids)

    # open a notebook, then insert a `%job ID` cell into it from the panel
    page.goto(lab.page_url("lab/tree/scratch.ipynb"))
    notebook = page.locator(".jp-NotebookPanel")
    expect(notebook).to_be_visible(timeout=60_000)
    row = row_of(page, job)
    open_panel(page)
    expect(row.locator(".nbt-JobRow-status")).to_have_text("running", timeout=30_000)
    row.locator('[title^="Insert a %job"]').click()
    cells = notebook.locator(".jp-Cell .cm-content")
    expect(cells.last).to_have_text(f"%job {job.id}")

    row.locator('[title="Stop job"]').click()
    dialog = page.locator(".jp-Dialog")
    expect(dialog).to_contain_text(f"Stop ui-sleepy ({job.id}) and every process it started?")
    page.screenshot(path=SCREENSHOTS / "stop-confirm.png")
    dialog.locator("button.jp-mod-warn").click()

    expect(row.locator(".nbt-JobRow-status")).to_have_text("stopped", timeout=60_000)
    expect(row.locator(".nbt-JobRow-message")).to_have_text("stopped on request")
    expect(row.locator('[title="Stop job"]')).to_have_count(0)
    expect(cells.last).to_have_text(f"%job {job.id}")  # still there once the notebook settled
    page.screenshot(path=SCREENSHOTS / "panel-stopped.png")
    assert job.status == "stopped"
    assert not [pid for pid in pids if alive(pid)]
    assert not alive(job.record.supervisor_pid)
