"""Reward models: a tiny reward-model job (TRL's RewardTrainer on the bundled preference pairs), then a grpo job that
scores its completions with it (`reward: {models: [job:ID]}`); one job each, started once for the module."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from nbtoolkit.api import Job, launch
from nbtoolkit.backends import LaunchError
from nbtoolkit.inputs.bundled import bundled_files
from nbtoolkit.runner import JobStore

pytestmark = pytest.mark.heavy  # real training: run first under pytest -n (tests/conftest.py)

REWARD_MODEL = {
    "task": "reward-model",
    "train": {"max_steps": 8, "batch_size": 8, "logging_steps": 1, "learning_rate": 3e-3},
}


def scored_by(reward_job: Job) -> dict:
    return {
        "task": "grpo",
        "reward": {"models": [f"job:{reward_job.id}"], "num_generations": 4, "max_completion_length": 8},
        "dataset": {"eval_split": None},
        "train": {"max_steps": 2, "batch_size": 8, "logging_steps": 1},
    }


@pytest.fixture(scope="module")
def jobs(tmp_path_factory) -> dict[str, Job]:
    store = JobStore(tmp_path_factory.mktemp("nbhome"))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("OMP_NUM_THREADS", "1")
        reward_model = launch(REWARD_MODEL, store=store)
        assert reward_model.wait(timeout=400) == "succeeded", reward_model.logs(tail=40)
        grpo = launch(scored_by(reward_model), store=store)
        assert grpo.wait(timeout=400) == "succeeded", grpo.logs(tail=40)
    return {"reward-model": reward_model, "grpo": grpo}


def test_a_reward_model_learns_to_prefer_the_chosen_reply_and_charts_its_accuracy_and_margin(jobs):
    from nbtoolkit.notebook.charts import ChartFigure

    job = jobs["reward-model"]
    train = [record for record in job.records() if record["kind"] == "train"]
    assert [record["step"] for record in train] == list(range(1, 9))
    assert all({"accuracy", "margin", "mean_reward"} <= record.keys() for record in train)  # TRL's RewardTrainer's
    held_out = [record for record in job.records() if record["kind"] == "eval"][-1]
    assert held_out["eval_accuracy"] > 0.5  # the 16 validation pairs: chosen scored above rejected more than by chance
    figure = ChartFigure()
    assert figure.draw(job.records(), job.name).startswith(b"\x89PNG")
    assert figure.rate.get_title() == "Rewards" and set(figure.reward_lines) == {"accuracy", "margin", "mean score"}
    assert all(len(line.get_xdata()) == len(train) for line in figure.reward_lines.values())


def test_the_reward_model_scores_a_conversation_as_it_was_trained(jobs):
    from nbtoolkit.notebook.try_it import TryIt

    job = jobs["reward-model"]
    pairs = [json.loads(line) for line in Path(bundled_files("preference")["train"]).read_text().splitlines()[:6]]
    preferred = [
        job.predict(row["prompt"] + row["chosen"])["score"] > job.predict(row["prompt"] + row["rejected"])["score"]
        for row in pairs
    ]
    assert sum(preferred) >= 4, preferred  # pairs it trained on: mostly told apart after 8 steps
    box = TryIt(job)
    box.text.value = "The answer is 4."
    scored = box.ask()
    assert isinstance(scored["score"], float) and f"score: <b>{scored['score']:.3f}</b>" in box.answer.value
    with pytest.raises(LaunchError, match=r"^lm-eval evaluates language models, and this job's task is reward-model"):
        job.evaluate(tasks=["nbtoolkit_tiny"])


def test_grpo_scores_its_completions_with_the_trained_reward_model(jobs):
    reward_model, grpo = jobs["reward-model"], jobs["grpo"]
    key = f"rewards/reward-model-{reward_model.id}/mean"
    train = [record for record in grpo.records() if record["kind"] == "train"]
    assert len(train) == 2 and all(key in record and record["reward"] == record[key] for record in train)
    assert grpo.record.info["reward_models_from"] == [reward_model.id]
    assert grpo.spec.reward.models == [str(reward_model.dir / "output" / "model")]  # what the job's machines read
    with pytest.raises(LaunchError, match=rf"job {grpo.id} trained task grpo, not reward-model"):
        launch(scored_by(grpo), store=grpo.store)


def test_reward_model_data_previews_the_chosen_reply_and_plans_two_sequences_a_pair():
    from nbtoolkit.inputs.data_preview import preview_data
    from nbtoolkit.planner import plan

    preview = preview_data({"task": "reward-model"})
    assert preview.data_format == "prompt/chosen/rejected" and "[[3 - 1 = 2. The answer is 2.<|im_end|>]]" in str(
        preview
    )
    base = {"hardware": {"accelerator": "cuda", "instance_type": "g5.xlarge"}, "train": {"max_steps": 10}}
    chat, pairs = plan({**base, "task": "chat"}), plan({**base, "task": "reward-model"})
    assert pairs.memory.activations == 2 * chat.memory.activations  # chosen and rejected: two sequences a pair


def test_reward_models_a_job_could_not_score_with_are_refused_before_launch(jobs, tmp_path, monkeypatch):
    from nbtoolkit.api import plan
    from nbtoolkit.backends.dispatch import render
    from nbtoolkit.inputs.preflight import input_problems
    from nbtoolkit.spec import load_spec

    reward_model, grpo = jobs["reward-model"], jobs["grpo"]
    assert plan(scored_by(reward_model), store=reward_model.store).memory.weights > 0  # a plan of a job's reward model

    def refused(models: list[str], **spec) -> str:
        found = input_problems(load_spec({**scored_by(reward_model), **spec, "reward": {"models": models}}))
        return found[0] if found else ""

    assert refused(["jbo:1234"]) == (
        "reward.models 'jbo:1234' is neither job:ID (a reward-model job), a hub id nor a folder on this machine"
    )
    chat_folder = str(grpo.dir / "output" / "model")  # a causal LM's folder: no score head
    assert refused([chat_folder]).startswith(f"reward.models '{chat_folder}' holds a LlamaForCausalLM model, not a")
    folder = str(reward_model.dir / "output" / "model")
    assert refused([folder]) == ""
    sagemaker = {
        "hardware": {"target": "sagemaker", "instance_type": "ml.g5.2xlarge", "accelerator": "cuda"},
        "sagemaker": {"role": "arn:aws:iam::111122223333:role/SageMakerExecutionRole", "region": "us-east-1"},
    }
    assert "is a folder of this machine, which a sagemaker job cannot read" in refused([folder], **sagemaker)
    monkeypatch.chdir(reward_model.dir / "output")  # a folder named relative to where the spec is launched from
    shipped = json.loads(
        render(load_spec({**scored_by(reward_model), "reward": {"models": ["model"]}})).files["spec.json"]
    )
    assert shipped["reward"]["models"] == [folder]


def test_reward_model_names_and_inputs_are_each_its_own(jobs):
    from nbtoolkit.tasks.grpo.train import scorer_names

    assert scorer_names(["/a/jobs/1f/output/model", "/b/merged", "/c/merged", "org/rm"]) == {
        "/a/jobs/1f/output/model": "reward-model-1f",
        "/b/merged": "merged-2",
        "/c/merged": "merged-3",
        "org/rm": "rm",
    }
    with pytest.raises(LaunchError, match=r"ending with the assistant's reply to score"):
        jobs["reward-model"].predict([{"role": "user", "content": "What is 2 + 2?"}])


def test_pairs_longer_than_max_length_are_said_left_out_and_none_left_is_one_sentence(capsys):
    from datasets import Dataset

    from nbtoolkit.spec import load_spec
    from nbtoolkit.tasks.reward_model.train import say_left_out
    from nbtoolkit.train.chat_template import chat_tokenizer
    from nbtoolkit.train.errors import TrainError

    rows = [json.loads(line) for line in Path(bundled_files("preference")["train"]).read_text().splitlines()[:4]]
    short = {"prompt": "Hi", "chosen": " ok", "rejected": " no"}
    spec = load_spec({"task": "reward-model", "dataset": {"max_length": 24}})
    tokenizer = chat_tokenizer(spec)
    say_left_out(spec, tokenizer, Dataset.from_list([short] * 2 + [{**short, "chosen": " ok" * 40}]))
    assert "1 of 3 train pairs are longer than dataset.max_length 24 tokens" in capsys.readouterr().out
    with pytest.raises(TrainError, match=r"^every one of the 4 train pairs is longer than dataset.max_length 8"):
        say_left_out(
            load_spec({"task": "reward-model", "dataset": {"max_length": 8}}), tokenizer, Dataset.from_list(rows)
        )


def test_the_plan_holds_the_reward_models_weights(jobs):
    from safetensors import safe_open

    from nbtoolkit.api import plan

    reward_model = jobs["reward-model"]
    folder = reward_model.dir / "output" / "model"
    with safe_open(str(folder / "model.safetensors"), "pt") as weights:
        params = sum(math.prod(weights.get_slice(name).get_shape()) for name in weights.keys())  # noqa: SIM118 (safe_open is not iterable)
    gpu = {"hardware": {"accelerator": "cuda", "instance_type": "g5.xlarge"}}
    functions = plan({**scored_by(reward_model), **gpu, "reward": {"functions": ["nbtoolkit.rewards:correct_answer"]}})
    scored = plan({**scored_by(reward_model), **gpu}, store=reward_model.store)
    # fp32 weights, no gradients or optimizer; the planner's decoder count is an estimate (its norms): within 1%
    assert scored.memory.weights - functions.memory.weights == pytest.approx(4 * params, rel=0.01)
    assert "reward models' weights" in scored.formula and "reward models" not in functions.formula
