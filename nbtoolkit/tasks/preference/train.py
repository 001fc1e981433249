"""preference: DPO (TRL's DPOTrainer), ORPO, SimPO (CPO with the SimPO loss) or KTO on prompt/chosen/rejected rows.

The reference model DPO and KTO measure against: with an adapter none is loaded (TRL turns the adapters
off to get the base's answers); in a full fine-tune a frozen copy of the starting weights, made here
because a bundled model exists nowhere TRL could load it from again. KTO learns from unpaired rows: each
pair becomes a desirable and an undesirable completion. `extra` reaches the method's config.
"""

from __future__ import annotations

import copy

from transformers import AutoModelForCausalLM

from nbtoolkit.tasks.preference import TASK
from nbtoolkit.train.chat_template import chat_tokenizer, fit_model
from nbtoolkit.train.data import with_row_columns
from nbtoolkit.train.models import load_model
from nbtoolkit.train.task_setup import TaskSetup, trl_overrides

COLUMNS = TASK.row_columns


def trainer_and_config(method: str) -> tuple[type, type, dict]:
    """TRL's trainer and config for a method, and the config fields that make the method."""
    if method == "dpo":
        from trl import DPOConfig, DPOTrainer

        return DPOTrainer, DPOConfig, {}
    if method == "kto":
        from trl import KTOConfig, KTOTrainer

        return KTOTrainer, KTOConfig, {}
    uncounted = {"include_num_input_tokens_seen": "no"}  # their batches hide the input tokens from the Trainer
    if method == "orpo":
        from trl.experimental.orpo import ORPOConfig, ORPOTrainer

        return ORPOTrainer, ORPOConfig, uncounted
    from trl.experimental.cpo import CPOConfig, CPOTrainer

    return CPOTrainer, CPOConfig, {"loss_type": "simpo", "cpo_alpha": 0.0, **uncounted}


def preference_block(spec):
    """The spec's preference block, or its defaults."""
    return spec.preference or type(spec).model_fields["preference"].annotation.__args__[0]()


def config_class(spec) -> type:
    """The trainer arguments' class of the spec's method: the fields `extra` may set."""
    return trainer_and_config(preference_block(spec).method)[1]


def unpaired(dataset):
    """KTO's rows: each pair as (prompt, chosen, True) and (prompt, rejected, False)."""

    def split(batch):
        count = len(batch["prompt"])
        return {
            "prompt": batch["prompt"] * 2,
            "completion": batch["chosen"] + batch["rejected"],
            "label": [True] * count + [False] * count,
        }

    return dataset.map(split, batched=True, remove_columns=list(COLUMNS))


def setup(spec, splits) -> TaskSetup:
    preference = preference_block(spec)
    tokenizer = chat_tokenizer(spec)
    model = load_model(AutoModelForCausalLM, spec, tokenizer)
    fit_model(model, tokenizer)
    trainer_class, config_class, method_fields = trainer_and_config(preference.method)
    datasets = {split: with_row_columns(spec, dataset, split) for split, dataset in splits.items()}
    if preference.method == "kto":
        datasets = {split: unpaired(dataset) for split, dataset in datasets.items()}
    overrides = dict(trl_overrides(spec), beta=preference.beta, max_length=spec.dataset.max_length, **method_fields)
    if preference.loss_type:
        overrides["loss_type"] = [preference.loss_type] if preference.method == "dpo" else preference.loss_type
    arguments = {}
    if preference.method in ("dpo", "kto") and spec.adapter is None:
        reference = copy.deepcopy(model).eval()
        reference.requires_grad_(False)
        arguments["ref_model"] = reference
    return TaskSetup(
        model=model,
        tokenizer=tokenizer,
        train_dataset=datasets["train"],
        eval_dataset=datasets.get("eval"),
        data_collator=None,
        trainer_class=trainer_class,
        arguments_class=config_class,
        argument_overrides=overrides,
        trainer_arguments=arguments,
    )
