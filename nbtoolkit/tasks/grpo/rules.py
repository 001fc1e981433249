"""GRPO's own spec rules and its planner workload: light (the spec runs `problem` as it is built)."""

from __future__ import annotations

from nbtoolkit.spec_parts.blocks import RewardSpec
from nbtoolkit.tasks import TaskWorkload


def problem(spec) -> str | None:
    """Whole groups of completions in every batch, and a reward for the user's own prompts."""
    found = whole_groups(spec)
    if found:
        return found
    own_data = spec.dataset.name or spec.dataset.files
    if own_data and not (spec.reward and (spec.reward.functions or spec.reward.models)):
        return (
            "task grpo on your own data needs reward.functions (module:function or path/to/file.py:function) or "
            "reward.models (job:ID of a reward-model job, a hub id or a folder); the bundled arithmetic reward "
            "fits only the bundled prompts"
        )
    return None


def whole_groups(spec) -> str | None:
    """TRL's GRPOConfig rule, checked before launch: each batch of completions holds whole groups."""
    group = (spec.reward or RewardSpec()).num_generations
    train, ranks = spec.train, spec.hardware.devices * spec.hardware.nodes
    batches = [("train.batch_size x train.grad_accum", train.batch_size * train.grad_accum)]
    data = spec.dataset
    if data.eval_split is not None and (not data.files or data.eval_split in data.files):
        batches.append(("train.eval_batch_size", train.eval_batch_size or train.batch_size))
    for field_name, per_rank in batches:
        if per_rank * ranks % group:
            return (
                f"{field_name} ({per_rank}) x {ranks} rank(s) must be divisible by reward.num_generations "
                f"({group}), so that each batch holds whole groups of completions; change one of them"
                + ("" if "eval" not in field_name else ", or set dataset.eval_split: null")
            )
    return None


def workload(spec) -> TaskWorkload:
    """Completions generated after each prompt and trained on; a reference model where the KL term is on (beta > 0);
    the reward models that score them."""
    reward = spec.reward or RewardSpec()
    return TaskWorkload(
        completion_tokens=reward.max_completion_length,
        reference_model=reward.beta > 0,
        reward_models=tuple(reward.models),
    )
