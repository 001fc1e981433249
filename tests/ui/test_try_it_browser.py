"""The Try it box in a real JupyterLab: `%job ID` of a succeeded tiny job shows it, and it answers."""

from __future__ import annotations

from nbtoolkit.api import launch
from nbtoolkit.runner import JobStore
from tests.ui.conftest import SCREENSHOTS
from tests.ui.test_form_browser import open_form


def test_job_magic_shows_a_try_it_box_that_answers(lab, page, console_errors):
    job = launch(
        {"task": "text-classification", "train": {"max_steps": 3, "batch_size": 4}}, store=JobStore(lab.home)
    )  # the server's (and its kernels') job store
    assert job.wait(timeout=300) == "succeeded", job.logs(tail=20)
    box = open_form(lab, page, "try.ipynb", f"%job {job.id} --tail 1", shows=".nbtoolkit-try-it")
    box.locator("textarea").fill("i feel wonderful and happy today")
    box.get_by_role("button", name="Try it").click()
    answer = box.get_by_text("label:")
    answer.wait_for(state="visible", timeout=120_000)  # a process loads the model and answers
    label = answer.locator("b").inner_text()
    assert label in {"anger", "fear", "joy", "love", "sadness", "surprise"}
    assert box.locator(".nbtoolkit-bar").count() == 6 and box.locator(".nbtoolkit-bar[data-marked]").count() == 1
    box.scroll_into_view_if_needed()
    box.screenshot(path=str(SCREENSHOTS / "try-it.png"))
    assert console_errors == []
