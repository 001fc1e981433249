"""Training health: what the numbers say beside whether the processes step. The rules on hand-made records and a
reward's bad return on hand-made calls; then three real jobs of the bundled tiny GRPO spec, started at once: a NaN
reward (warn: it succeeds, but `show`, REST and the run doctor say it learned nothing), the same under
`train.on_anomaly: stop` (stopped), and a reward returning None (failed, naming it)."""

from __future__ import annotations

import io
import json
import math
from contextlib import redirect_stdout
from types import SimpleNamespace

import pytest

from nbtoolkit import cli
from nbtoolkit.api import Job, launch
from nbtoolkit.rewards import RewardError, checked
from nbtoolkit.runner import JobStore
from nbtoolkit.runner.health import FLAT_STEPS, TrainingSigns
from nbtoolkit.server.run_doctor import DoctorService
from nbtoolkit.server.service import JobsService
from nbtoolkit.spec import load_spec
from nbtoolkit.train.program import training_arguments


def train(step: int, **values) -> dict:
    return {"kind": "train", "step": step, **values}


def signs(records: list[dict]) -> TrainingSigns:
    folded = TrainingSigns()
    folded.update(records)
    return folded


def test_a_nan_counts_at_once_and_names_the_reward_function():
    folded = signs([train(10, loss=0.0, grad_norm=0.0, reward=None, **{"rewards/ratio/mean": None})])
    assert folded.summary("grpo") == {
        "anomalies": ["reward ratio is NaN or infinite at every logging step since step 10"],
        "whole_run": True,
    }


def test_an_evaluation_loss_that_is_no_number_counts_at_once_and_no_longer_once_it_is():
    nan_eval = [train(10, loss=0.5), {"kind": "eval", "step": 10, "eval_loss": None}, train(20, loss=0.4)]
    assert signs(nan_eval).summary("text-classification") == {
        "anomalies": ["the evaluation loss is NaN or infinite at every evaluation since step 10"],
        "whole_run": True,
    }
    evals = [{"kind": "eval", "step": step, "eval_loss": 0.7} for step in range(10, 10 * FLAT_STEPS + 10, 10)]
    assert signs([*nan_eval, *evals]).anomalies("text-classification") == []  # a flat eval loss is no sign


def test_the_trainer_logs_the_loss_as_it_is():
    """With transformers' default filter a NaN step logs the window's mean of the others, a window of NaN steps
    `loss 0.0`: the run doctor would never see the NaN."""
    args = training_arguments(load_spec({"task": "text-classification"}), "unused", has_eval=False)
    assert args.logging_nan_inf_filter is False


def test_a_flat_series_counts_after_flat_steps_and_no_longer_once_it_moves():
    steps = range(10, 10 * FLAT_STEPS + 10, 10)
    records = [train(step, loss=0.693, grad_norm=0.0) for step in steps]
    assert signs(records[:-1]).anomalies("text-classification") == []  # FLAT_STEPS - 1 steps: a blip
    assert [text for _, text in signs(records).anomalies("text-classification")] == [
        "the loss stays 0.693 at every logging step since step 10",
        "the gradient norm is 0 at every logging step since step 10: no weight moves",
    ]
    assert signs([*records, train(99, loss=0.5, grad_norm=0.3)]).anomalies("text-classification") == []
    # GRPO's loss is about 0 by design: only its gradient norm and reward say whether it learns
    assert signs([train(step, loss=0.0, grad_norm=0.1 * step, reward=step) for step in steps]).anomalies("grpo") == []


def test_a_grpo_run_without_reward_and_one_that_stopped_learning():
    assert signs([train(1, loss=0.1)]).anomalies("grpo") == [
        (1, "no reward is logged: the reward functions gave no number")
    ]
    late = signs([train(1, reward=0.2), *(train(step, reward=0.5) for step in range(2, 2 + FLAT_STEPS))])
    assert late.summary("grpo") == {
        "anomalies": ["the reward stays 0.5 at every logging step since step 2: no completion is preferred"],
        "whole_run": False,
    }


def test_a_finished_follow_says_learned_nothing_once_and_show_json_has_the_warning(store, capsys):
    record = store.create(name="flat", task="text-classification", backend="local")
    store.update(record.id, status="running")
    flat = "the loss stays 0.693 at every logging step since step 10"
    store.update(record.id, status="succeeded", info={"training": {"anomalies": [flat], "whole_run": True}})
    (store.job_dir(record.id) / "output.log").write_text("")
    assert cli.follow(Job(record.id, store=store)) == 0
    assert capsys.readouterr().out == f"job {record.id} succeeded, but learned nothing: {flat}\n"
    assert cli.main(["show", record.id, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["warning"] == f"learned nothing: {flat}"


def rows(count: int = 3) -> dict:
    return {
        "prompts": [f"What is {n} + 1?" for n in range(count)],
        "completions": [str(n) for n in range(count)],
        "answer": [str(n + 1) for n in range(count)],
        "trainer_state": SimpleNamespace(global_step=4),
    }


def none_reward(completions, **kwargs):
    return None


def short_reward(completions, **kwargs):
    return [1.0]


def word_reward(completions, **kwargs):
    return [1.0, "high", 0.0]


def ratio_reward(completions, answer, **kwargs):
    return [1 / (int(text) - 1) for text in completions]  # 0/0 on the prompt whose completion is 1


def nan_reward(completions, **kwargs):
    return [math.nan, math.inf, 1.0]


@pytest.mark.parametrize(
    ("function", "said"),
    [
        (none_reward, "reward none_reward returned None for the 3 completions at step 5; it must return a list of 3"),
        (short_reward, "reward short_reward returned 1 values for 3 completions at step 5; it must return a list"),
        (word_reward, "reward word_reward returned 'high' (a str) for row 1 of 3 at step 5 (prompt 'What is 1 + 1?')"),
        (ratio_reward, "reward ratio_reward raised ZeroDivisionError: division by zero on row 1 of 3 at step 5 (pro"),
    ],
)
def test_a_bad_reward_is_named_with_its_row(function, said):
    with pytest.raises(RewardError) as caught:
        checked(function)(**rows())
    assert str(caught.value).startswith(said)


def test_a_nan_score_is_said_once_and_passed_on(capsys):
    reward = checked(nan_reward)
    assert reward.__name__ == "nan_reward"  # TRL names the reward series after it
    values = reward(**rows())
    assert math.isnan(values[0]) and values[1:] == [math.inf, 1.0]
    reward(**rows())
    out = capsys.readouterr().out
    assert out.count("warning: reward nan_reward returned nan for row 0 of 3 at step 5") == 1, out


# -- real jobs -------------------------------------------------------------------------------------------------


def nan_everywhere(completions, **kwargs):
    """A reward whose every score is 0/0."""
    return [float("nan")] * len(completions)


def nothing(completions, **kwargs):
    """A reward that forgot its return."""


@pytest.fixture(scope="module")
def jobs(tmp_path_factory) -> dict[str, Job]:
    """The bundled tiny GRPO spec (the tiny chat model, the arithmetic prompts, an evaluation per epoch) with a
    bad reward: 50 steps logged every 10 give FLAT_STEPS records."""
    store = JobStore(tmp_path_factory.mktemp("nbhome"))
    spec = {"task": "grpo", "train": {"max_steps": 50}}
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("OMP_NUM_THREADS", "1")
        started = {
            "warn": launch(spec, store=store, rewards=[nan_everywhere]),
            "stop": launch({**spec, "train": {"on_anomaly": "stop"}}, store=store, rewards=[nan_everywhere]),
            "none": launch(spec, store=store, rewards=[nothing]),
        }
        for job in started.values():
            job.wait(timeout=300)
    return started


@pytest.mark.heavy  # real training
def test_a_nan_reward_succeeds_but_every_view_says_it_learned_nothing(jobs, monkeypatch):
    job = jobs["warn"]
    record = job.record
    assert record.status == "succeeded", job.logs(tail=20)
    nan = "reward nan_everywhere is NaN or infinite at every logging step since step 10"
    zero = "the gradient norm is 0 at every logging step since step 10: no weight moves"
    said = f"learned nothing: {zero}; {nan}"
    monkeypatch.setenv("NBTOOLKIT_HOME", str(job.store.home))
    with redirect_stdout(io.StringIO()) as shown:
        assert cli.main(["show", job.id]) == 0
    assert "    status: succeeded, but learned nothing\n" in shown.getvalue()
    assert f"   warning: {said}\n" in shown.getvalue()
    detail = JobsService(job.store).get(job.id)  # what the panel and its notification read
    assert detail.display["status"] == "succeeded, but learned nothing" and detail.warning == said
    assert DoctorService(job.store).health(job.id).training == [zero, nan]
    log = job.logs()
    assert "training anomaly (train.on_anomaly: warn): reward nan_everywhere is NaN" in log
    assert "eval_reward None" in log  # the final line's formatting takes TRL's NaN mean (None)


@pytest.mark.heavy  # real training
def test_on_anomaly_stop_stops_the_run(jobs):
    record = jobs["stop"].record
    assert record.status == "stopped", jobs["stop"].logs(tail=20)
    assert record.message.startswith("stopped by train.on_anomaly: stop: reward nan_everywhere is NaN")
    assert record.step < 50


@pytest.mark.heavy  # real training
def test_a_reward_returning_none_fails_naming_it(jobs):
    record = jobs["none"].record
    assert record.status == "failed"
    assert record.message == (
        "reward nothing returned None for the 8 completions at step 1; it must return a list of 8 numbers, one per "
        "completion (None for one it does not score)"
    )
