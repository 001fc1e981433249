"""The run doctor in a real JupyterLab: a 2-rank torchrun job's detail view shows one row per rank with the
straggler marked, and JupyterLab's own notification says when the job succeeded, with an Open job action."""

from __future__ import annotations

from playwright.sync_api import Page, expect

from nbtoolkit.api import launch
from nbtoolkit.runner import JobStore
from tests.conftest import SCRIPTS
from tests.ui.conftest import SCREENSHOTS
from tests.ui.test_jobs_panel import open_panel, row_of

#: rank 1 sleeps 0.2 s more a step than rank 0: a straggler for about 25 s, then the job succeeds
RANKS = {
    "task": "causal-lm",
    "name": "ui-ranks",
    "script": {"path": str(SCRIPTS / "ranks.py"), "args": ["--steps", "100", "--slow-rank", "1", "--slow-s", "0.2"]},
    "hardware": {"devices": 2},
}


def test_the_rank_table_marks_the_straggler_and_a_notification_says_the_job_succeeded(lab, lab_page: Page):
    page = lab_page
    open_panel(page)
    job = launch(RANKS, store=JobStore(lab.home))
    row = row_of(page, job)
    expect(row.locator(".nbt-JobRow-status")).to_have_text("running", timeout=60_000)
    row.locator(".nbt-JobRow-name").click()
    view = page.locator(f"#nbtoolkit-job-{job.id}")
    ranks = view.locator(".nbt-RunDoctor-ranks tbody tr")
    expect(ranks).to_have_count(2, timeout=60_000)
    expect(view.locator(".nbt-RunDoctor-state")).to_have_text("slow", timeout=30_000)
    expect(view.locator(".nbt-RunDoctor-ranks tr.nbt-mod-slow td").first).to_have_text("1")
    expect(view.locator(".nbt-RunDoctor-health")).to_contain_text("rank 1 straggles")
    expect(view.locator("button", has_text="Checkpoint now")).to_be_visible()
    page.screenshot(path=SCREENSHOTS / "run-doctor-ranks.png")

    # a custom loop cannot save on request: the server's sentence shows under the buttons
    view.locator("button", has_text="Checkpoint now").click()
    expect(view.locator(".nbt-RunDoctor-answer")).to_contain_text("cannot save on request")

    toast = page.locator(".Toastify__toast", has_text="job ui-ranks succeeded")
    expect(toast).to_be_visible(timeout=120_000)
    expect(toast.locator("button", has_text="Open job")).to_be_visible()
    assert job.status == "succeeded"
    page.screenshot(path=SCREENSHOTS / "run-doctor-notification.png")
