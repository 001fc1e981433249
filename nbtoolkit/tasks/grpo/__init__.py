"""grpo: TRL's GRPO, completions generated for each prompt and scored by reward functions or reward models."""

from nbtoolkit.tasks import Task
from nbtoolkit.tasks.chat import CHAT_MODEL

TASK = Task(
    "grpo",
    {},
    program="nbtoolkit.tasks.grpo.train",
    **CHAT_MODEL,
    row_columns=("prompt",),
    workload="nbtoolkit.tasks.grpo.rules:workload",
    set_by_field={
        "num_generations": "reward.num_generations",
        "max_completion_length": "reward.max_completion_length",
        "temperature": "reward.temperature",
        "beta": "reward.beta",
        "use_vllm": "reward.use_vllm",
        "reward_weights": "reward.weights",
    },
    block="reward",
    spec_rule="nbtoolkit.tasks.grpo.rules:problem",
    loss_near_zero=True,
    logs_rewards=True,
    listed=70,
)
