"""reward-model: a reward model trained on preference pairs with TRL's RewardTrainer.

The model is the chosen causal LM with a one-output sequence-classification head (its last token's score); the
trainer pushes the chosen reply's score above the rejected one's (Bradley-Terry) and logs the pairs' accuracy and
margin, which the charts draw. Conversations are rendered through the run's chat template, as TRL does, so a GRPO
run that scores with this model later reads them the same way. `extra` reaches RewardConfig.
"""

from __future__ import annotations

from transformers import AutoModelForSequenceClassification
from trl import RewardConfig, RewardTrainer

from nbtoolkit.train.chat_template import chat_tokenizer
from nbtoolkit.train.models import load_model
from nbtoolkit.train.tasks import TaskSetup
from nbtoolkit.train.tasks.chat import trl_overrides
from nbtoolkit.train.tasks.preference import pairs


def config_class(spec) -> type:
    """The trainer arguments' class: the fields `extra` may set."""
    return RewardConfig


def setup(spec, splits) -> TaskSetup:
    tokenizer = chat_tokenizer(spec)
    model = load_model(AutoModelForSequenceClassification, spec, tokenizer, num_labels=1)
    if len(tokenizer) > model.get_input_embeddings().weight.shape[0]:  # tokens the chat template added
        model.resize_token_embeddings(len(tokenizer))
    model.config.pad_token_id = tokenizer.pad_token_id  # the head scores each row's last token before the padding
    datasets = {split: pairs(spec.task, dataset, split) for split, dataset in splits.items()}
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
