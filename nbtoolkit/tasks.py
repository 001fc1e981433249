"""The columns each task reads: spec field -> the column it defaults to (the bundled sample's own).

One table for the training program, the form and the rehearsal; light (no model libraries).
"""

from __future__ import annotations

COLUMNS: dict[str, dict[str, str | None]] = {
    "text-classification": {"text_column": "text", "text_pair_column": None, "label_column": "label"},
    "question-answering": {"question_column": "question", "context_column": "context", "answer_column": "answers"},
    "summarization": {"text_column": "article", "summary_column": "highlights"},
    "causal-lm": {"text_column": "text"},
}


def columns_used(task: str, dataset) -> dict[str, str]:
    """Spec field -> the column a spec's dataset block reads for the task (optional fields it leaves out)."""
    chosen = {field: getattr(dataset, field) or default for field, default in COLUMNS[task].items()}
    return {field: name for field, name in chosen.items() if name}
