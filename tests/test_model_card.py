"""The model card a pushed model carries names no folder of this machine: a local base model and local data
files are described, their paths are not published (the card is public on the Hub)."""

from __future__ import annotations

from nbtoolkit.spec import load_spec
from nbtoolkit.trained_model.card import model_card


def test_a_card_publishes_no_local_paths(store, tmp_path):
    model = tmp_path / "home" / "me" / "models" / "my-bert"
    model.mkdir(parents=True)
    data = tmp_path / "home" / "me" / "data"
    spec = load_spec(
        {
            "task": "text-classification",
            "model": str(model),
            "dataset": {"files": {"train": str(data / "train.jsonl"), "validation": str(data / "val.jsonl")}},
        }
    )
    record = store.create(name="card", task="text-classification", backend="local")
    card = model_card(spec, record, [{"kind": "eval", "step": 4, "eval_accuracy": 0.5}])
    assert str(tmp_path) not in card and "/home/me" not in card
    assert "base_model" not in card and "A fine-tune of a local model, task text-classification" in card
    assert "- source: local files (train: train.jsonl, validation: val.jsonl)" in card


def test_a_hub_model_is_named_as_the_cards_base_model(store):
    spec = load_spec({"task": "text-classification", "model": "google-bert/bert-base-uncased"})
    record = store.create(name="card", task="text-classification", backend="local")
    card = model_card(spec, record, [])
    assert (
        "base_model: google-bert/bert-base-uncased" in card and "A fine-tune of google-bert/bert-base-uncased" in card
    )


def test_a_grpo_card_names_what_scored_it_and_publishes_no_local_file(store, tmp_path):
    """The task's own block (`reward:`) is on the card: its functions and reward models, a local file by its name
    and a local model as local, a notebook's function by its name without its source."""
    rewards = tmp_path / "home" / "me" / "my_rewards.py"
    rewards.parent.mkdir(parents=True)
    rewards.write_text("def brevity(completions, **kwargs):\n    return [0.0 for _ in completions]\n")
    local_judge = tmp_path / "home" / "me" / "judge"
    local_judge.mkdir()
    shipped = {"name": "polite", "source": "def polite(completions, **kwargs):\n    return [1.0] * len(completions)\n"}
    spec = load_spec(
        {
            "task": "grpo",
            "reward": {
                "functions": [f"{rewards}:brevity", "nbtoolkit.rewards:correct_answer", shipped],
                "models": ["job:0123abcd", "OpenAssistant/reward-model-deberta-v3-large-v2", str(local_judge)],
                "num_generations": 2,
            },
        }
    )
    card = model_card(spec, store.create(name="card", task="grpo", backend="local"), [])
    section = card.split("## Reward\n\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert (
        section[0]
        == "- functions: my_rewards.py:brevity, nbtoolkit.rewards:correct_answer, polite (defined in a notebook)"
    )
    assert section[1] == ("- models: job:0123abcd, OpenAssistant/reward-model-deberta-v3-large-v2, a local model")
    assert "- num generations: 2" in section and str(tmp_path) not in card and "return [1.0]" not in card


def test_a_preference_card_says_its_method_and_beta_and_a_classifier_card_has_no_task_section(store):
    spec = load_spec({"task": "preference", "preference": {"method": "dpo", "beta": 0.2}})
    card = model_card(spec, store.create(name="c", task="preference", backend="local"), [])
    assert "## Preference\n\n- method: dpo\n- beta: 0.2\n\n" in card
    plain = model_card(
        load_spec({"task": "text-classification"}),
        store.create(name="p", task="text-classification", backend="local"),
        [],
    )
    assert "## Preference" not in plain and "## Reward" not in plain and plain.count("## ") == 4
