"""reward-model: a score for a reply, TRL's RewardTrainer on preference pairs (a one-output head on a causal LM)."""

from nbtoolkit.tasks import Task

TASK = Task(
    "reward-model",
    {},
    "nbtoolkit/tiny-chat",
    "sequence-classification",
    "a model that can carry a one-score sequence-classification head, such as qwen2, llama or gpt2",
    "nbtoolkit.tasks.reward_model.train",
    pipeline_tag="text-classification",
    auto_model="AutoModelForSequenceClassification",
    peft_task_type="SEQ_CLS",
    prompt="a reply to score",
    answer="nbtoolkit.tasks.reward_model.answer:score",
    trl=True,
    row_columns=("prompt", "chosen", "rejected"),
    sequences_per_sample=2,
    sample_data="preference",
    set_by_field={"max_length": "dataset.max_length"},
    preview_note="reward-model leaves out every pair whose chosen or rejected side is longer than "
    "dataset.max_length {data.max_length} tokens (TRL's RewardTrainer filters them): nothing is cut",
    scores_replies=True,
    rows_left_out="nbtoolkit.tasks.reward_model.lengths:left_out_length",
    listed=80,
)
