"""The Try it box of a chat job in a real JupyterLab is a chat: two messages, two replies, the history kept."""

from __future__ import annotations

from nbtoolkit.api import launch
from nbtoolkit.runner import JobStore
from tests.ui.conftest import SCREENSHOTS
from tests.ui.test_form_browser import open_form


def test_the_try_it_box_of_a_chat_job_keeps_the_conversation(lab, page, console_errors):
    job = launch(
        {"task": "chat", "train": {"max_steps": 3, "batch_size": 4, "learning_rate": 3.0e-3}}, store=JobStore(lab.home)
    )  # the server's (and its kernels') job store
    assert job.wait(timeout=300) == "succeeded", job.logs(tail=20)
    box = open_form(lab, page, "chat.ipynb", f"%job {job.id} --tail 1", shows=".nbtoolkit-try-it")
    replies = box.locator(".nbtoolkit-chat-model")
    for turn, message in enumerate(["What is 2 + 3?", "And 4 - 1?"], start=1):
        box.locator("textarea").fill(message)
        box.get_by_role("button", name="Try it").click()
        replies.nth(turn - 1).wait_for(state="visible", timeout=180_000)  # a process loads the model and replies
    assert box.locator(".nbtoolkit-chat-you").all_inner_texts() == ["you: What is 2 + 3?", "you: And 4 - 1?"]
    assert replies.count() == 2 and box.locator("textarea").input_value() == ""
    box.scroll_into_view_if_needed()
    box.screenshot(path=str(SCREENSHOTS / "try-it-chat.png"))
    box.get_by_role("button", name="New chat").click()
    box.locator(".nbtoolkit-chat-you").first.wait_for(state="detached", timeout=30_000)  # the kernel redraws it
    assert console_errors == []
