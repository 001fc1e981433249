"""The model card a pushed model carries names no folder of this machine: a local base model and local data
files are described, their paths are not published (the card is public on the Hub)."""

from __future__ import annotations

from nbtoolkit.model_card import model_card
from nbtoolkit.spec import load_spec


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
