"""How long a preference pair is as TRL's RewardTrainer reads it, without importing TRL: the job says how many pairs
it leaves out from this, and the plan counts them before launch (nbtoolkit.inputs.left_out_rows).

RewardTrainer filters, it does not cut: a pair whose chosen or rejected side is longer than `max_length` tokens is
left out (trl/trainer/reward_trainer.py:730-737 in TRL 1.16.0; RewardConfig.max_length, reward_config.py:144).
"""

from __future__ import annotations

from typing import Any


def pair_length(tokenizer, row: dict[str, Any]) -> int:
    """The longer side of a pair in tokens, as TRL's RewardTrainer tokenizes it (prompt + reply: a conversation
    through the chat template, a text with the end token) before it filters by max_length."""
    sides = []
    for reply in (row["chosen"], row["rejected"]):
        if isinstance(reply, list):
            sides.append(
                len(tokenizer.apply_chat_template(row["prompt"] + reply, tokenize=True, return_dict=True)["input_ids"])
            )
        else:
            text = row["prompt"] + reply
            sides.append(
                len(tokenizer(text if text.endswith(tokenizer.eos_token) else text + tokenizer.eos_token)["input_ids"])
            )
    return max(sides)


def left_out_length(spec, tokenizer, row: dict[str, Any]) -> int | None:
    """The pair's length when the trainer leaves it out (longer than dataset.max_length), else None: the task's
    `rows_left_out` fact."""
    length = pair_length(tokenizer, row)
    return length if length > spec.dataset.max_length else None
