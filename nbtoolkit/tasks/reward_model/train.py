"""reward-model: a reward model trained on preference pairs with TRL's RewardTrainer.

The model is the chosen causal LM with a one-output sequence-classification head (its last token's score); the
trainer pushes the chosen reply's score above the rejected one's (Bradley-Terry) and logs the pairs' accuracy and
margin, which the charts draw. Conversations are rendered through the run's chat template, as TRL does, so a GRPO
run that scores with this model later reads them the same way. `extra` reaches RewardConfig.
"""

from __future__ import annotations

import os

from transformers import AutoModelForSequenceClassification
from trl import RewardConfig, RewardTrainer

from nbtoolkit.tasks.reward_model.lengths import pair_length
from nbtoolkit.train.chat_template import chat_tokenizer
from nbtoolkit.train.data import with_row_columns
from nbtoolkit.train.errors import TrainError
from nbtoolkit.train.models import load_model
from nbtoolkit.train.task_setup import TaskSetup, trl_overrides


def config_class(spec) -> type:
    """The trainer arguments' class: the fields `extra` may set."""
    return RewardConfig


def setup(spec, splits) -> TaskSetup:
    tokenizer = chat_tokenizer(spec)
    model = load_model(AutoModelForSequenceClassification, spec, tokenizer, num_labels=1)
    if len(tokenizer) > model.get_input_embeddings().weight.shape[0]:  # tokens the chat template added
        model.resize_token_embeddings(len(tokenizer))
    model.config.pad_token_id = tokenizer.pad_token_id  # the head scores each row's last token before the padding
    datasets = {split: with_row_columns(spec, dataset, split) for split, dataset in splits.items()}
    say_left_out(spec, tokenizer, datasets["train"])
    return TaskSetup(
        model=model,
        tokenizer=tokenizer,
        train_dataset=datasets["train"],
        eval_dataset=datasets.get("eval"),
        data_collator=None,
        trainer_class=RewardTrainer,
        arguments_class=RewardConfig,
        argument_overrides=dict(trl_overrides(spec), max_length=spec.dataset.max_length),
    )


def say_left_out(spec, tokenizer, train) -> None:
    """The train pairs TRL will leave out (longer than dataset.max_length; it filters, it does not cut), said in the
    log; none left is one sentence now, not an empty sampler's error after the model loaded."""
    limit = spec.dataset.max_length
    longer = sum(pair_length(tokenizer, row) > limit for row in train)
    if longer == len(train):
        raise TrainError(
            f"every one of the {len(train)} train pairs is longer than dataset.max_length {limit} tokens, and TRL's "
            "RewardTrainer leaves such pairs out, so nothing would train; raise dataset.max_length"
        )
    if longer and os.environ.get("RANK", "0") == "0":
        print(
            f"[nbtoolkit] {longer} of {len(train)} train pairs are longer than dataset.max_length {limit} tokens: "
            "TRL's RewardTrainer leaves them out",
            flush=True,
        )
