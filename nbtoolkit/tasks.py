"""The task registry: one entry per task, read by the spec, the training program, the pairing check,
the form, the model card, adapters, predict, Try it and the rehearsal alike. Light: no model libraries.

Every fact the rest of the code asks of a task is a field here, so a task with a fact missing is refused as the
registry is built, in one sentence, not at predict or push time.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal

#: which models can do a task, as the pairing check reads a model's config
Head = Literal["sequence-classification", "question-answering", "seq2seq", "causal-lm"]


@dataclass(frozen=True)
class Task:
    name: str
    #: spec field -> the column it defaults to (the bundled sample's own; None: optional and unused)
    columns: dict[str, str | None]
    #: the model the task uses when the spec names none: built at run time from a bundled config
    bundled_model: str
    head: Head
    #: what the task needs of a model, in words, with models that have it
    needs: str
    #: the training program's module that sets the task up (model, datasets, collator, metrics)
    program: str
    #: the Hub's pipeline tag for the model card (chat models: text-generation; the Hub's chat widget reads the
    #: saved template)
    pipeline_tag: str
    #: the transformers auto class the task trains, and PEFT's task type for an adapter on it
    auto_model: str
    peft_task_type: str
    #: what the Try-it box asks for
    prompt: str
    #: `module:function` that answers one input with a trained model (Job.predict, Try it)
    answer: str
    #: how the Try-it box asks: one text, a question with its context, or a chat (the history goes with each message)
    try_it: Literal["text", "question-and-context", "chat"] = "text"
    #: trained by TRL's trainers (the distribution's `chat` extra); their data formats are nbtoolkit.chat_formats
    trl: bool = False
    #: the columns each row needs, for a task that reads fixed columns rather than spec-named ones
    row_columns: tuple[str, ...] = ()
    #: sequences the model reads per example (a preference pair: 2), for the planner's activations and time
    sequences_per_sample: int = 1
    #: the bundled sample data it trains on when the spec names none (nbtoolkit/assets/data/<folder>; "": its name)
    sample_data: str = ""
    #: trainer argument -> the spec field that sets it, beyond every task's (nbtoolkit.spec_extra); `extra` may not
    #: set them
    set_by_field: dict[str, str] = field(default_factory=dict)


class TaskError(ValueError):
    """A task registered without a fact the rest of the code asks of it; the message is one sentence."""


#: each fact a task must state, in words (for the sentence a missing one gets)
FACTS = {
    "bundled_model": "the bundled model it trains when the spec names none",
    "needs": "what it needs of a model, in words",
    "program": "the training program's module that sets it up",
    "pipeline_tag": "the Hub's pipeline tag for its model card",
    "auto_model": "the transformers auto class it trains",
    "peft_task_type": "PEFT's task type for an adapter",
    "prompt": "what the Try-it box asks for",
    "answer": "the module:function that answers an input with the trained model",
}
CALLABLE = re.compile(r"^[\w.]+:\w+$")


def check_task(task: Task) -> Task:
    """The task, or TaskError naming the first fact it lacks."""
    for name, meaning in FACTS.items():
        if not getattr(task, name):
            raise TaskError(f"task '{task.name}' has no {name} ({meaning}); add it where the task is defined")
    if not CALLABLE.match(task.answer):
        raise TaskError(f"task '{task.name}': answer '{task.answer}' is not a module:function")
    return task


def registry(tasks) -> dict[str, Task]:
    """Tasks by name, each checked (check_task)."""
    return {task.name: check_task(task) for task in tasks}


#: what the chat, preference and grpo tasks share: a causal LM that replies in turns, trained by TRL
CHAT_MODEL: dict[str, Any] = {
    "pipeline_tag": "text-generation",
    "auto_model": "AutoModelForCausalLM",
    "peft_task_type": "CAUSAL_LM",
    "prompt": "your message to the model",
    "try_it": "chat",
    "answer": "nbtoolkit.train.inference:reply",
    "trl": True,
}

TASKS: dict[str, Task] = registry(
    (
        Task(
            "text-classification",
            {"text_column": "text", "text_pair_column": None, "label_column": "label"},
            "nbtoolkit/tiny-bert",
            "sequence-classification",
            "a model with a sequence-classification head (BERT, RoBERTa, DistilBERT, ...)",
            "nbtoolkit.train.tasks.classification",
            pipeline_tag="text-classification",
            auto_model="AutoModelForSequenceClassification",
            peft_task_type="SEQ_CLS",
            prompt="a text to classify",
            answer="nbtoolkit.train.inference:classify",
        ),
        Task(
            "summarization",
            {"text_column": "article", "summary_column": "highlights"},
            "nbtoolkit/tiny-t5",
            "seq2seq",
            "an encoder-decoder (sequence-to-sequence) model such as t5, flan-t5 or bart",
            "nbtoolkit.train.tasks.summarization",
            pipeline_tag="summarization",
            auto_model="AutoModelForSeq2SeqLM",
            peft_task_type="SEQ_2_SEQ_LM",
            prompt="an article to summarize",
            answer="nbtoolkit.train.inference:summarize",
            set_by_field={"predict_with_generate": "train.predict_with_generate"},
        ),
        Task(
            "question-answering",
            {"question_column": "question", "context_column": "context", "answer_column": "answers"},
            "nbtoolkit/tiny-bert",
            "question-answering",
            "a model with an extractive question-answering head (BERT, RoBERTa, DistilBERT, ...)",
            "nbtoolkit.train.tasks.question_answering",
            pipeline_tag="question-answering",
            auto_model="AutoModelForQuestionAnswering",
            peft_task_type="QUESTION_ANS",
            prompt="the context the answer is in",
            try_it="question-and-context",
            answer="nbtoolkit.train.inference:extract_answer",
        ),
        Task(
            "causal-lm",
            {"text_column": "text"},
            "nbtoolkit/tiny-gpt2",
            "causal-lm",
            "a decoder-only language model such as gpt2, llama or qwen2",
            "nbtoolkit.train.tasks.causal_lm",
            pipeline_tag="text-generation",
            auto_model="AutoModelForCausalLM",
            peft_task_type="CAUSAL_LM",
            prompt="the start of a text to continue",
            answer="nbtoolkit.train.inference:continue_text",
        ),
        Task(
            "chat",
            {},
            "nbtoolkit/tiny-chat",
            "causal-lm",
            "a decoder-only (chat) model such as qwen2, llama or gpt2",
            "nbtoolkit.train.tasks.chat",
            **CHAT_MODEL,
            set_by_field={"max_length": "dataset.max_length", "packing": "dataset.packing"},
        ),
        Task(
            "preference",
            {},
            "nbtoolkit/tiny-chat",
            "causal-lm",
            "a decoder-only (chat) model such as qwen2, llama or gpt2",
            "nbtoolkit.train.tasks.preference",
            **CHAT_MODEL,
            row_columns=("prompt", "chosen", "rejected"),
            sequences_per_sample=2,
            set_by_field={
                "max_length": "dataset.max_length",
                "beta": "preference.beta",
                "loss_type": "preference.loss_type",
            },
        ),
        Task(
            "grpo",
            {},
            "nbtoolkit/tiny-chat",
            "causal-lm",
            "a decoder-only (chat) model such as qwen2, llama or gpt2",
            "nbtoolkit.train.tasks.grpo",
            **CHAT_MODEL,
            row_columns=("prompt",),
            set_by_field={
                "num_generations": "reward.num_generations",
                "max_completion_length": "reward.max_completion_length",
                "temperature": "reward.temperature",
                "beta": "reward.beta",
                "use_vllm": "reward.use_vllm",
                "reward_weights": "reward.weights",
            },
        ),
        # a score for a reply: TRL's RewardTrainer on preference pairs, a one-output head on a causal LM
        Task(
            "reward-model",
            {},
            "nbtoolkit/tiny-chat",
            "sequence-classification",
            "a model that can carry a one-score sequence-classification head, such as qwen2, llama or gpt2",
            "nbtoolkit.train.tasks.reward_model",
            pipeline_tag="text-classification",
            auto_model="AutoModelForSequenceClassification",
            peft_task_type="SEQ_CLS",
            prompt="a reply to score",
            answer="nbtoolkit.train.inference:score",
            trl=True,
            row_columns=("prompt", "chosen", "rejected"),
            sequences_per_sample=2,
            sample_data="preference",
            set_by_field={"max_length": "dataset.max_length"},
        ),
    )
)
#: the tasks TRL trains (the distribution's `chat` extra)
TRL_TASKS: tuple[str, ...] = tuple(name for name, task in TASKS.items() if task.trl)
TASK_NAMES: tuple[str, ...] = tuple(TASKS)


def columns_used(task: str, dataset) -> dict[str, str]:
    """Spec field -> the column a spec's dataset block reads for the task (optional fields it leaves out)."""
    chosen = {field: getattr(dataset, field) or default for field, default in TASKS[task].columns.items()}
    return {field: name for field, name in chosen.items() if name}
