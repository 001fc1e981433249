"""The form in a real JupyterLab, in headless Chromium: it renders, reacts to edits, logs no errors."""

from __future__ import annotations

from playwright.sync_api import expect

from tests.conftest import SCRIPTS
from tests.ui.conftest import SCREENSHOTS, run_first_cell, write_notebook

SLEEPY = SCRIPTS / "sleepy.py"


def open_form(lab, page, name: str, magic: str, shows: str = ".nbtoolkit-form"):
    """Open a notebook that loads nbtoolkit and runs `magic`, run both cells, and return what it `shows`
    (by default the form)."""
    write_notebook(lab.root_dir / name, "%load_ext nbtoolkit", magic)
    page.goto(lab.tree(name))
    run_first_cell(page)
    page.keyboard.press("Shift+Enter")
    form = page.locator(shows)
    form.wait_for(state="visible", timeout=180_000)  # a kernel starts first: slow on a busy machine
    return form


def test_the_form_renders_and_follows_edits(lab, page, console_errors, screenshot):
    form = open_form(lab, page, "form.ipynb", "%finetune --form --task text-classification --steps 5")
    yaml_tab = form.locator(".widget-tab .widget-html").first
    assert "max_steps: 5" in yaml_tab.inner_text()
    assert page.locator(".nbtoolkit-field-parallelism-zero-stage").count() == 0

    page.locator(".nbtoolkit-field-parallelism-strategy select").select_option(label="deepspeed")
    page.locator(".nbtoolkit-field-parallelism-zero-stage").wait_for(state="visible")
    page.wait_for_function(
        "() => document.querySelector('.nbtoolkit-form .widget-tab .widget-html')"
        ".innerText.includes('strategy: deepspeed')"
    )

    steps = page.locator(".nbtoolkit-field-train-max-steps input")
    steps.fill("ten")  # validated as typed: the spec's sentence appears next to the field
    form.get_by_text("train.max_steps: 'ten' is not valid").first.wait_for(state="visible")
    steps.fill("12")
    page.wait_for_function(
        "() => document.querySelector('.nbtoolkit-form .widget-tab .widget-html').innerText.includes('max_steps: 12')"
    )
    assert form.get_by_role("button", name="Launch").is_enabled()
    assert screenshot("form").stat().st_size > 10_000
    assert console_errors == []


def test_launch_in_the_browser_shows_the_browser_drawn_chart_and_stop_ends_the_job(
    lab, page, console_errors, screenshot
):
    form = open_form(
        lab,
        page,
        "launch.ipynb",
        f"%finetune --form --task text-classification --name ui-sleeper --set script.path={SLEEPY}",
    )
    form.get_by_role("button", name="Launch").click()
    # the browser draws the chart, following the job through the REST API (the kernel sends nothing more)
    state = form.locator(".widget-output .nbt-JobChartOutput .nbt-JobChartOutput-job")
    expect(state).to_contain_text("ui-sleeper", timeout=120_000)
    expect(state).to_contain_text("running", timeout=60_000)
    screenshot("form-launched")
    form.get_by_role("button", name="Stop").click()
    form.get_by_text("stopped").first.wait_for(state="visible")
    expect(state).to_contain_text("stopped", timeout=30_000)
    assert console_errors == []


def test_the_data_section_shows_the_token_histograms_of_the_summarization_sample(lab, page, console_errors, screenshot):
    page.set_viewport_size({"width": 1400, "height": 2000})  # the whole section on screen for its screenshot
    form = open_form(
        lab, page, "data.ipynb", "%finetune --form --task summarization --set dataset.max_target_length=20"
    )
    form.get_by_role("button", name="Preview data").click()
    histograms = form.locator(".nbtoolkit-data-histogram")
    expect(histograms).to_have_count(2, timeout=180_000)  # the kernel reads the sample and tokenizes it
    section = form.locator(".nbtoolkit-data-section")
    assert "320 summarization examples from the bundled summarization sample" in section.inner_text()
    target = form.locator(".nbtoolkit-data-histogram[data-side='target']")
    assert "suggested dataset.max_target_length" in target.inner_text()
    widths = [bar.bounding_box()["width"] for bar in target.locator(".nbtoolkit-bar").all()]
    assert len(widths) >= 5 and max(widths) > 100  # drawn bars, the longest one wide
    cut = target.locator(".nbtoolkit-bar[data-marked]")
    assert cut.count() == 1 and cut.evaluate("bar => getComputedStyle(bar).backgroundColor") != target.locator(
        ".nbtoolkit-bar:not([data-marked])"
    ).first.evaluate("bar => getComputedStyle(bar).backgroundColor")
    section.scroll_into_view_if_needed()
    section.screenshot(path=str(SCREENSHOTS / "form-data.png"))
    assert (SCREENSHOTS / "form-data.png").stat().st_size > 10_000
    assert console_errors == []
