"""question-answering: the span of a context that answers a question (extractive, SQuAD-style)."""

from nbtoolkit.tasks import Task

TASK = Task(
    "question-answering",
    {"question_column": "question", "context_column": "context", "answer_column": "answers"},
    "nbtoolkit/tiny-bert",
    "question-answering",
    "a model with an extractive question-answering head (BERT, RoBERTa, DistilBERT, ...)",
    "nbtoolkit.tasks.question_answering.train",
    pipeline_tag="question-answering",
    auto_model="AutoModelForQuestionAnswering",
    peft_task_type="QUESTION_ANS",
    prompt="the context the answer is in",
    dataset_fields=("doc_stride",),
    try_it="question-and-context",
    answer="nbtoolkit.tasks.question_answering.answer:extract_answer",
    preview_lengths="nbtoolkit.tasks.question_answering.preview:token_lengths",
    preview_note="question-answering splits a longer example into windows of dataset.max_length "
    "{data.max_length} tokens overlapping by dataset.doc_stride {data.doc_stride}: nothing is cut",
    listed=30,
)
