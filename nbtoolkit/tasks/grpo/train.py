"""grpo: reinforcement learning from reward functions with TRL's GRPOTrainer (group-relative advantages).

Each prompt is sampled `reward.num_generations` times (transformers' generate; vLLM only where the spec
asks and CUDA exists), every reward function scores every completion, and the policy moves toward the
completions that beat their group's mean. Columns other than `prompt` reach the reward functions as
keyword arguments (the bundled prompts carry `answer`). `extra` reaches GRPOConfig.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from transformers import AutoModelForCausalLM
from trl import GRPOConfig, GRPOTrainer

from nbtoolkit.hardware.precision import spec_load_dtype
from nbtoolkit.inputs.bundled import is_bundled
from nbtoolkit.rewards import RewardError, checked, load
from nbtoolkit.spec import RewardSpec
from nbtoolkit.spec_parts.reward_names import BUNDLED_REWARDS
from nbtoolkit.train.chat_template import chat_tokenizer, fit_model
from nbtoolkit.train.errors import TrainError
from nbtoolkit.train.models import as_loaded, load_model, model_source, torch_dtype
from nbtoolkit.train.task_setup import TaskSetup, trl_overrides


def config_class(spec) -> type:
    """The trainer arguments' class: the fields `extra` may set."""
    return GRPOConfig


def reward_functions(reward: RewardSpec) -> list:
    """The reward functions, loaded; the bundled ones when the spec names neither functions nor models."""
    try:
        return [
            checked(load(reference)) for reference in reward.functions or ([] if reward.models else BUNDLED_REWARDS)
        ]
    except RewardError as exc:
        raise TrainError(str(exc)) from None


def reward_models(spec) -> tuple[list, list]:
    """Each reward model with its tokenizer (whose chat template renders prompt + completion for it, as TRL's
    RewardTrainer trained it), in the dtype the policy loads in (a 7B reward model in fp32 would take 28 GB), named
    after its job or folder in the charts instead of TRL's folder name `model`, one name each."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    names = scorer_names(spec.reward.models)
    models, tokenizers = [], []
    for name in spec.reward.models:
        try:
            model = AutoModelForSequenceClassification.from_pretrained(
                model_source(name), num_labels=1, **as_loaded(torch_dtype(spec_load_dtype(spec)))
            )
            tokenizer = AutoTokenizer.from_pretrained(model_source(name))
        except (OSError, ValueError, RuntimeError) as exc:  # RuntimeError: a head of another size (a classifier)
            raise TrainError(
                f"reward.models '{name}' could not be loaded as a one-output sequence-classification model "
                f"({str(exc).strip().splitlines()[0]}); give a reward-model job (job:ID), a hub id or a local folder"
            ) from None
        model.config._name_or_path = names[name]
        models.append(model.eval())
        tokenizers.append(tokenizer)
    return models, tokenizers


def scorer_names(models: list[str]) -> dict[str, str]:
    """Each reward model's name in the logs and charts: its job's id for a job's model folder (…/<id>/output/model),
    else the folder's or hub id's last part; a name two share gets its place in the list (TRL keys the rewards by
    name, so two alike would log as one)."""
    names = []
    for name in models:
        path = Path(name)
        named = f"reward-model-{path.parent.parent.name}" if path.parts[-2:] == ("output", "model") else path.name
        names.append(named)
    return {
        name: (named if names.count(named) == 1 else f"{named}-{index + 1}")
        for index, (name, named) in enumerate(zip(models, names, strict=True))
    }


def prompts(dataset, split: str):
    if "prompt" not in dataset.column_names:
        raise TrainError(
            f"the {split} split has no prompt column (it has {', '.join(dataset.column_names)}); grpo data needs "
            "prompt (a text or a conversation), and any columns its reward functions read"
        )
    return dataset


def reference_source(model) -> None:
    """GRPO with a KL term builds its reference from the model's path: give a bundled model (no path) one."""
    folder = tempfile.mkdtemp(prefix="nbtoolkit-reference-")
    model.save_pretrained(folder)
    model.config._name_or_path = folder
    model.name_or_path = folder


def setup(spec, splits) -> TaskSetup:
    reward = spec.reward or RewardSpec()
    tokenizer = chat_tokenizer(spec)
    tokenizer.padding_side = "left"  # generation continues the prompt's last token
    model = load_model(AutoModelForCausalLM, spec, tokenizer)
    fit_model(model, tokenizer)
    if reward.beta > 0 and spec.adapter is None and is_bundled(spec.model_name):
        reference_source(model)
    functions = reward_functions(reward)
    models, model_tokenizers = reward_models(spec) if reward.models else ([], [])
    if os.environ.get("RANK", "0") == "0":
        names = ", ".join(
            [function.__name__ for function in functions] + [model.config._name_or_path for model in models]
        )
        print(f"[nbtoolkit] rewards: {names} | {reward.num_generations} completions per prompt", flush=True)
    return TaskSetup(
        model=model,
        tokenizer=tokenizer,
        train_dataset=prompts(splits["train"], "train"),
        eval_dataset=prompts(splits["eval"], "eval") if "eval" in splits else None,
        data_collator=None,
        trainer_class=GRPOTrainer,
        arguments_class=config_class(spec),
        argument_overrides=dict(
            trl_overrides(spec),
            num_generations=reward.num_generations,
            max_completion_length=reward.max_completion_length,
            temperature=reward.temperature,
            beta=reward.beta,
            use_vllm=reward.use_vllm,
            reward_weights=reward.weights,
            include_num_input_tokens_seen="no",  # GRPO's batches are prompts: the Trainer cannot count their tokens
        ),
        trainer_arguments={
            "reward_funcs": [*functions, *models],  # TRL weighs them in this order: functions, then models
            **({"reward_processing_classes": [None] * len(functions) + model_tokenizers} if models else {}),
        },
    )
