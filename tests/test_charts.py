"""Live charts: headless in a real kernel (nbclient) on a real job and on a captured `!python` cell,
and in-process on finished, still-running and log-parsed jobs."""

from __future__ import annotations

import base64
import json
import subprocess
import time

import pytest

from nbtoolkit.notebook.browser_chart import JOB_MIME, WATCH_S, BrowserChart, chart
from nbtoolkit.notebook.charts import LiveChart, RunState, live_chart, progress_line
from tests.conftest import PYTHON, SCRIPTS
from tests.notebook_runner import display_outputs, execute, notebook, saved

PNG = b"\x89PNG\r\n\x1a\n"
# a real (tiny) Trainer run held to 0.25 s a step, so it runs ~10 s on any machine: long enough to watch
PACED = {
    "task": "text-classification",
    "script": {
        "path": str(SCRIPTS / "hf_style_train.py"),
        "args": ["--max_steps", "40", "--logging_steps", "4", "--step_seconds", "0.25"],
    },
}


def test_live_chart_in_a_kernel_redraws_while_the_job_runs_and_the_saved_notebook_keeps_the_image(home, tmp_path):
    nb = notebook(
        "%load_ext nbtoolkit\nimport time\nfrom nbtoolkit.api import launch\n"
        "from nbtoolkit.notebook.charts import live_chart",
        f"job = launch({json.dumps(PACED)})\nstarted = time.monotonic()\nchart = live_chart(job)\n"
        "returned_in = time.monotonic() - started",
        "print(job.wait(timeout=300), chart.wait(timeout=60), chart.redraws, round(returned_in, 3))",
        f"%%track_metrics captured\n!{PYTHON} {SCRIPTS / 'hf_style_train.py'} --max_steps 12 --logging_steps 2",
        "print(captured.kind.tolist().count('train'), captured.loc[captured.kind == 'train', 'step'].tolist())",
        # a log stream through a logging handler made before the cell (as the SageMaker SDK logs), quietly
        "import logging, sys\nlog = logging.getLogger('job-stream')\nlog.addHandler(logging.StreamHandler(sys.stderr))\n"
        "log.setLevel(logging.INFO)",
        "%%track_metrics streamed --quiet --no-chart\nlog.info(\"{'loss': '0.5', 'epoch': '0.1'}\")\n"
        "print({'eval_loss': 0.4, 'epoch': 0.1})",
    )
    client = execute(nb, tmp_path)
    nb = saved(nb, tmp_path / "live.ipynb")

    status, finished, redraws, returned_in = nb.cells[2].outputs[0].text.split()
    assert (status, finished) == ("succeeded", "True")
    assert float(returned_in) < 1.0  # the kernel is free at once

    (chart_output,) = display_outputs(nb.cells[1])
    updates, captured_updates = client.updates.values()  # the job's chart, then the captured cell's
    running = [update for update in updates if update["text/plain"].split(": ", 1)[1].startswith("running")]
    images = {update["image/png"] for update in running}
    assert len(images) >= 3, [update["text/plain"] for update in updates]  # redrawn >= 3 times while running
    assert len(updates) == int(redraws)
    # the saved notebook holds the final image: the job's end
    final = chart_output.data
    assert base64.b64decode(final["image/png"]).startswith(PNG)
    assert final["image/png"] == updates[-1]["image/png"]
    assert "succeeded · step 40/40 (100%)" in final["text/plain"]

    captured_cell = nb.cells[3]
    (captured_chart,) = display_outputs(captured_cell)
    assert base64.b64decode(captured_chart.data["image/png"]).startswith(PNG)
    assert "done · step 12/12" in captured_chart.data["text/plain"]
    assert len(captured_updates) >= 2 and captured_chart.data["image/png"] == captured_updates[-1]["image/png"]
    printed = "".join(output.get("text", "") for output in captured_cell.outputs if output.output_type == "stream")
    assert "'loss'" in printed  # the command's output is still shown
    assert "captured: 9 metric records (6 train, 2 eval, 1 summary)" in printed.replace("[nbtoolkit] ", "")
    train_count, steps = nb.cells[4].outputs[0].text.split(" ", 1)
    steps = json.loads(steps)  # from the progress bar, which may trail a log line by a refresh (README)
    assert int(train_count) == 6 and steps == sorted(steps) and steps[0] >= 0 and steps[-1] <= 12
    (summary,) = nb.cells[6].outputs  # quiet: only the summary line, nothing of the stream itself
    assert summary.text == "[nbtoolkit] streamed: 2 metric records (1 train, 1 eval, 0 summary)\n"


def write_job_metrics(store, records, status="succeeded"):
    record = store.create(name="fake", task="text-classification", backend="local")
    store.update(record.id, status=status, started=1000.0, ended=1030.0 if status == "succeeded" else None)
    lines = "".join(json.dumps(item) + "\n" for item in records)
    (store.job_dir(record.id) / "metrics.jsonl").write_text(lines)
    return record.id


def train_record(step, **values):
    return {
        "time": 1000.0 + step,
        "step": step,
        "kind": "train",
        "max_steps": 30,
        "loss": 2.0 / step,
        "learning_rate": 0.001,
        **values,
    }


def test_chart_of_a_job_that_ended_before_this_kernel_draws_once_and_stops(store):
    records = [
        train_record(step, samples_per_second=100.0 + step, tokens_per_second=9000.0, window_seconds=1.0)
        for step in (10, 20, 30)
    ] + [{"time": 1031.0, "step": 30, "kind": "eval", "eval_loss": 0.1}]
    job_id = write_job_metrics(store, records)
    chart = live_chart(job_id, show=False)
    assert not chart.running, "an ended job's final image is drawn before the call returns (a cell's output keeps it)"
    assert chart.error is None
    assert chart.redraws == 1 and chart.png.startswith(PNG) and len(chart.records) == 4


def test_chart_of_a_parsed_log_without_samples_per_second(store):
    """User scripts' logs give steps/s (from tqdm) but no samples/s: the throughput panel uses it."""
    records = [train_record(step, steps_per_second=3.5) for step in (5, 10)]
    chart = live_chart(write_job_metrics(store, records), log_scale=True, show=False)
    assert chart.wait(timeout=60) and chart.error is None and chart.png.startswith(PNG)


def test_chart_follows_new_records_and_redraws_at_most_once_a_second(store):
    from nbtoolkit.api import Job

    # a row with no supervisor yet stays active for its first minute: running until we end it
    job_id = write_job_metrics(store, [train_record(1)], status="running")
    chart = live_chart(Job(job_id, store), show=False)
    path = store.job_dir(job_id) / "metrics.jsonl"
    started = time.monotonic()
    for step in range(2, 12):
        with open(path, "a") as handle:
            handle.write(json.dumps(train_record(step)) + "\n")
        time.sleep(0.2)
    while chart.redraws < 2 and time.monotonic() - started < 30:
        time.sleep(0.1)
    elapsed = time.monotonic() - started
    assert 2 <= chart.redraws <= elapsed / 1.0 + 1  # at most about once a second
    store.update(job_id, status="succeeded", ended=time.time())
    assert chart.wait(timeout=60) and len(chart.records) == 11
    assert chart.redraws >= 3  # the final drawing once the job ended


def test_progress_line_says_where_the_run_is():
    records = [train_record(10), train_record(20)]
    line = progress_line(records, RunState("running", started=1000.0, ended=None, finished=False), now=1040.0)
    # 10 steps left at the steady 1 s/step (steps 10 to 20 took 10 s), not at the 2 s/step the warm-up makes of it
    assert line == "running · step 20/30 (66%) · elapsed 0:40 · remaining ~0:10 · loss 0.1000"
    assert (
        progress_line(records[-1:], RunState("running", 1000.0, None, False), now=1040.0)
        == "running · step 20/30 (66%) · elapsed 0:40 · remaining ~0:20 · loss 0.1000"
    )  # one window: the pace so far
    priced = RunState("running", 1000.0, None, False, cost="cost $0.50 · projected $0.75")
    assert progress_line(records, priced, now=1040.0).endswith("loss 0.1000 · cost $0.50 · projected $0.75")
    assert progress_line([], RunState("queued", None, None, False)) == "queued · waiting for metrics"


def test_smoothing_out_of_range_is_refused(store):
    with pytest.raises(ValueError, match="smoothing 1.0 is out of range"):
        LiveChart(None, smoothing=1.0)


def test_load_ext_and_the_chart_compare_modules_import_nothing_heavy():
    """Heavy libraries load only when a chart is drawn or a figure is made, not on import or %load_ext."""
    code = (
        "import sys\nfrom IPython.core.interactiveshell import InteractiveShell\nshell = InteractiveShell.instance()\n"
        "shell.run_line_magic('load_ext', 'nbtoolkit')\nassert 'track_metrics' in shell.magics_manager.magics['cell']\n"
        "import nbtoolkit.metrics.compare, nbtoolkit.compiled, nbtoolkit.notebook.charts\n"
        "print(sorted(name for name in ('torch', 'transformers', 'matplotlib', 'datasets') if name in sys.modules))"
    )
    result = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip().splitlines()[-1] == "[]"


def test_a_chart_whose_following_fails_says_so_under_its_last_image(monkeypatch):
    from nbtoolkit.notebook import charts

    published = []

    class Display:
        def update(self, bundle, raw):
            published.append(bundle)

    class Vanishing:
        """Metrics that can be read once, then the file is gone for good."""

        title = "job 0000 · vanishing"

        def __init__(self):
            self.reads = 0

        def read_new(self):
            self.reads += 1
            if self.reads > 1:
                raise OSError("metrics.jsonl vanished")
            return [train_record(1), train_record(2)]

        def state(self):
            return RunState("running", 1000.0, None, False)

    monkeypatch.setattr(charts, "_display_handle", lambda title: Display())
    chart = LiveChart(Vanishing(), interval=0.0)
    assert chart.wait(timeout=30)
    assert isinstance(chart.error, OSError) and "failed" in repr(chart) and "done" not in repr(chart)
    last = published[-1]
    assert last["text/plain"] == "job 0000 · vanishing: chart stopped following: OSError: metrics.jsonl vanished"
    assert '<img src="data:image/png;base64,' in last["text/html"] and "chart stopped following" in last["text/html"]


def test_a_job_chart_in_a_kernel_is_one_job_reference_and_one_final_update_with_the_image(home, tmp_path):
    """Browser-drawn (the default): the kernel sends the reference once, then, when the job has ended, the
    final image once; nbclient (no lab extension) saves that image."""
    nb = notebook(
        "%load_ext nbtoolkit\nfrom nbtoolkit.api import launch",
        f"job = launch({json.dumps(PACED)})\nchart = job.chart()",
        "print(job.wait(timeout=300), chart.wait(timeout=60), chart.redraws, type(chart).__name__)",
    )
    client = execute(nb, tmp_path)
    nb = saved(nb, tmp_path / "browser.ipynb")
    assert nb.cells[2].outputs[0].text.split() == ["succeeded", "True", "1", "BrowserChart"]

    (output,) = display_outputs(nb.cells[1])
    job_id = output.data[JOB_MIME]["job_ids"][0]
    assert output.data[JOB_MIME] == {"job_ids": [job_id], "options": {"log_scale": False, "smoothing": 0.6}}
    (updates,) = client.updates.values()
    assert len(updates) == 1, "nothing is sent while the job runs: one update, at its end"
    assert base64.b64decode(output.data["image/png"]).startswith(PNG) and output.data == updates[0]
    assert (
        f"job {job_id} · " in output.data["text/plain"] and "succeeded · step 40/40 (100%)" in output.data["text/plain"]
    )


def test_a_browser_chart_of_a_running_job_sends_its_final_image_once_the_job_ends(store):
    from nbtoolkit.api import Job

    job_id = write_job_metrics(store, [], status="running")
    started = chart(Job(job_id, store), show=False)
    assert started.running and "image/png" not in started.bundle  # no metrics yet: no image to draw
    assert "waiting for metrics" in started.bundle["text/plain"]
    (store.job_dir(job_id) / "metrics.jsonl").write_text(
        "".join(json.dumps(train_record(step)) + "\n" for step in (10, 20, 30))
    )
    time.sleep(2 * WATCH_S)
    assert started.running and started.redraws == 0  # running: the kernel draws nothing
    store.update(job_id, status="succeeded", ended=time.time())
    assert started.wait(timeout=30) and started.error is None
    assert started.redraws == 1 and base64.b64decode(started.bundle["image/png"]) == started.png
    assert started.png.startswith(PNG) and "succeeded · step 30/30 (100%)" in started.bundle["text/plain"]


def test_several_jobs_on_one_chart_and_who_draws_it(store, monkeypatch):
    first = write_job_metrics(store, [train_record(10), {"time": 1011.0, "step": 10, "kind": "eval", "eval_loss": 0.3}])
    second = write_job_metrics(store, [train_record(10), train_record(20)])
    both = chart([first, second], log_scale=True, show=False)
    assert not both.running and both.bundle[JOB_MIME]["job_ids"] == [first, second]
    assert base64.b64decode(both.bundle["image/png"]).startswith(PNG)
    assert both.bundle["text/plain"].splitlines()[1].startswith(f"job {second} · fake: succeeded · step 20/30")

    assert isinstance(chart(first, live="kernel", show=False), LiveChart)
    monkeypatch.setenv("NBTOOLKIT_CHART", "kernel")
    assert isinstance(chart(first, show=False), LiveChart)
    assert isinstance(chart(first, live="browser", show=False), BrowserChart)
    with pytest.raises(ValueError, match="live='svg' is not a way to draw a chart; use 'browser'"):
        chart(first, live="svg", show=False)
    with pytest.raises(ValueError, match="the kernel-drawn chart follows one job, not 2"):
        chart([first, second], show=False)
