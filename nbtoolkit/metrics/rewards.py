"""Which reward series a run's metrics hold: DPO's (chosen, rejected, margin, accuracy), a reward model's (accuracy,
margin, mean score) or each GRPO function's.

TRL logs them under its own names (`rewards/chosen`, `rewards/<function>/mean`, `reward`, `reward_std`,
`completions/mean_length`); the training callback passes them through to metrics.jsonl as they are,
and the charts ask here what to draw. Data only.
"""

from __future__ import annotations

from typing import Any

#: label -> TRL's key, for the preference trainers (DPO, ORPO, SimPO, KTO)
PREFERENCE_KEYS = {
    "chosen": "rewards/chosen",
    "rejected": "rewards/rejected",
    "margin": "rewards/margins",
    "accuracy": "rewards/accuracies",
}
#: label -> TRL's key, for its RewardTrainer (reward-model): how often the chosen reply scored higher, by how much
REWARD_MODEL_KEYS = {"accuracy": "accuracy", "margin": "margin", "mean score": "mean_reward"}
#: GRPO: the group's reward (all functions, weighted), its spread, and the completions' length
TOTAL, SPREAD, COMPLETION_LENGTH = "reward", "reward_std", "completions/mean_length"


def reward_keys(records: list[dict[str, Any]]) -> dict[str, str]:
    """label -> metrics key of the reward series in these train records; empty for a run with no rewards."""
    keys: set[str] = set()
    for record in records:
        if record.get("kind") == "train":
            keys |= record.keys()
    if "rewards/margins" in keys:
        return {label: key for label, key in PREFERENCE_KEYS.items() if key in keys}
    if {"accuracy", "margin"} <= keys:
        return {label: key for label, key in REWARD_MODEL_KEYS.items() if key in keys}
    found = {key.split("/")[1]: key for key in sorted(keys) if key.startswith("rewards/") and key.endswith("/mean")}
    if found and TOTAL in keys:
        found["total"] = TOTAL
    return found
