"""summarization: an encoder-decoder writes a summary of an article (ROUGE at evaluation)."""

from nbtoolkit.tasks import Task

TASK = Task(
    "summarization",
    {"text_column": "article", "summary_column": "highlights"},
    "nbtoolkit/tiny-t5",
    "seq2seq",
    "an encoder-decoder (sequence-to-sequence) model such as t5, flan-t5 or bart",
    "nbtoolkit.tasks.summarization.train",
    pipeline_tag="summarization",
    auto_model="AutoModelForSeq2SeqLM",
    peft_task_type="SEQ_2_SEQ_LM",
    prompt="an article to summarize",
    answer="nbtoolkit.tasks.summarization.answer:summarize",
    dataset_fields=("prompt_template", "max_target_length"),
    set_by_field={"predict_with_generate": "train.predict_with_generate"},
    evaluation_generates=True,
    preview_lengths="nbtoolkit.tasks.summarization.preview:token_lengths",
    listed=20,
)
