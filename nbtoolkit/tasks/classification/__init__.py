"""text-classification: a label for a text (or a pair of texts), on a sequence-classification head."""

from nbtoolkit.tasks import Task

TASK = Task(
    "text-classification",
    {"text_column": "text", "text_pair_column": None, "label_column": "label"},
    "nbtoolkit/tiny-bert",
    "sequence-classification",
    "a model with a sequence-classification head (BERT, RoBERTa, DistilBERT, ...)",
    "nbtoolkit.tasks.classification.train",
    pipeline_tag="text-classification",
    auto_model="AutoModelForSequenceClassification",
    peft_task_type="SEQ_CLS",
    prompt="a text to classify",
    answer="nbtoolkit.tasks.classification.answer:classify",
    preview_lengths="nbtoolkit.tasks.classification.preview:token_lengths",
    listed=10,
)
