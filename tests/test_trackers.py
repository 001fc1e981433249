"""report_to: a real job reports to TensorBoard event files and a local MLflow store, and both hold the losses
the job's own metrics.jsonl holds; the locations show in `nbtoolkit show` and `%job`; nothing is reported unless
asked, and a tracker whose package is missing is refused before anything starts."""

from __future__ import annotations

import pytest

from nbtoolkit.api import Job, launch
from nbtoolkit.backends import LaunchError
from nbtoolkit.cli import main
from nbtoolkit.spec import load_spec
from nbtoolkit.spec_parts.trackers import TRACKING_DIR, locations, run_name

TRAIN = {"max_steps": 12, "batch_size": 8, "learning_rate": 0.003, "logging_steps": 4}


@pytest.fixture(scope="module")
def tracked_job(tmp_path_factory) -> Job:
    from nbtoolkit.runner import JobStore

    store = JobStore(tmp_path_factory.mktemp("nbhome"))
    job = launch({"task": "causal-lm", "report_to": ["tensorboard", "mlflow"], "train": TRAIN}, store=store)
    assert job.wait(timeout=240) == "succeeded", job.logs(tail=30)
    return job


def logged_losses(job: Job) -> dict[int, float]:
    return {record["step"]: record["loss"] for record in job.records() if record["kind"] == "train"}


def test_tensorboard_event_files_hold_the_logged_loss(tracked_job):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(locations(tracked_job.spec, tracked_job.dir)["tensorboard"])
    events.Reload()
    read = {event.step: event.value for event in events.Scalars("train/loss")}
    assert read.keys() == logged_losses(tracked_job).keys() == {4, 8, 12}
    assert read == pytest.approx(logged_losses(tracked_job), rel=1e-6)


def test_mlflow_local_store_holds_the_run_and_its_loss(tracked_job):
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=locations(tracked_job.spec, tracked_job.dir)["mlflow"])
    experiment = client.get_experiment_by_name(tracked_job.spec.display_name)
    (run,) = client.search_runs([experiment.experiment_id])
    assert run.info.run_name == run_name(tracked_job.spec, tracked_job.dir)
    read = {metric.step: metric.value for metric in client.get_metric_history(run.info.run_id, "loss")}
    assert read == pytest.approx(logged_losses(tracked_job), rel=1e-6)
    assert run.data.params["learning_rate"] == "0.003"


def test_show_and_job_magic_name_the_run_and_where_it_is(tracked_job, monkeypatch, capsys, shell):
    monkeypatch.setenv("NBTOOLKIT_HOME", str(tracked_job.store.home))
    assert main(["show", tracked_job.id]) == 0
    from_show = capsys.readouterr().out
    shell.run_line_magic("job", tracked_job.id)
    for shown in (from_show, capsys.readouterr().out):
        assert f"tracking: run name {run_name(tracked_job.spec, tracked_job.dir)}" in shown
        assert f"tracking: mlflow sqlite:///{tracked_job.dir}/{TRACKING_DIR}/mlflow.db" in shown
        assert f"tracking: tensorboard {tracked_job.dir}/{TRACKING_DIR}/tensorboard" in shown


def test_nothing_is_reported_unless_the_spec_asks(store):
    spec = load_spec({"task": "causal-lm"})
    assert spec.report_to == [] and "report_to" not in spec.to_dict()
    job = launch({"task": "causal-lm", "train": {**TRAIN, "max_steps": 4}}, store=store)
    assert job.wait(timeout=240) == "succeeded", job.logs(tail=30)
    assert not (job.dir / TRACKING_DIR).exists() and not (job.dir / "output" / "runs").exists()


@pytest.mark.parametrize("tracker", ["wandb", "trackio"])
def test_a_tracker_that_is_not_installed_is_refused_in_one_sentence(store, tracker):
    import importlib.util

    if importlib.util.find_spec(tracker) is not None:
        pytest.skip(f"{tracker} is installed here")  # then it runs offline, as the environment sets
    with pytest.raises(LaunchError) as caught:
        launch({"task": "causal-lm", "report_to": [tracker]}, store=store)
    assert str(caught.value) == (
        f"report_to names {tracker}, whose package is not installed here; pip install {tracker}, or remove it"
    )
    assert store.list() == []
