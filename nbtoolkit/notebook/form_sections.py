"""What the configuration form shows: its sections, the fields of each in order, and when a field applies
to the current choices (a remote engine's block gets a section of its own).

Data, not widgets: the form (nbtoolkit.notebook.form) makes a widget of each field and shows the ones
that apply; a field's kind, choices and default come from the spec's model, not from here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from nbtoolkit import backends
from nbtoolkit.notebook.spec_fields import block_model
from nbtoolkit.tasks import TASKS

Values = Mapping[str, Any]
#: a form-only choice (not a spec field): where the examples come from
SOURCE = "dataset.source"
SOURCES = (("bundled sample data", "bundled"), ("hub dataset", "hub"), ("local files", "files"))
#: a form-only choice: train every weight, or adapters (the spec's adapter block, with its type)
ADAPTER = "adapter.choice"
ADAPTERS = (("every weight (full fine-tune)", "none"), ("LoRA adapters", "lora"), ("QLoRA adapters (CUDA)", "qlora"))
#: the form-only dropdowns and their (label, value) options
FORM_CHOICES: dict[str, tuple[tuple[str, str], ...]] = {SOURCE: SOURCES, ADAPTER: ADAPTERS}


def always(values: Values) -> bool:
    return True


def when(path: str, *allowed: Any) -> Callable[[Values], bool]:
    """Applies while the field at `path` has one of the `allowed` values."""
    return lambda values: values.get(path) in allowed


def read_by_task(field: str) -> Callable[[Values], bool]:
    """Applies while the chosen task reads this field of the dataset block (a column, or one of its own)."""
    return lambda values: (
        values.get("task") in TASKS
        and (field in TASKS[values["task"]].columns or field in TASKS[values["task"]].dataset_fields)
    )


@dataclass(frozen=True)
class FormField:
    path: str
    label: str
    applies: Callable[[Values], bool] = always


@dataclass(frozen=True)
class Section:
    title: str
    fields: tuple[FormField, ...]
    applies: Callable[[Values], bool] = always


WITH_ADAPTER = when(ADAPTER, "lora", "qlora")
DEEPSPEED = when("parallelism.strategy", "deepspeed")
SMP = when("parallelism.strategy", "smp")


def multi_node_here(values: Values) -> bool:
    """Several nodes started from here: each needs its rank and the master's address."""
    return values.get("hardware.target") == "local" and (values.get("hardware.nodes") or 1) > 1


CORE_SECTIONS: tuple[Section, ...] = (
    Section(
        "Model and task",
        (
            FormField("name", "Run name"),
            FormField("task", "Task"),
            FormField("model", "Model"),
        ),
    ),
    Section(
        "Dataset",
        (
            FormField(SOURCE, "Examples from"),
            FormField("dataset.name", "Hub dataset", when(SOURCE, "hub")),
            FormField("dataset.config", "Config", when(SOURCE, "hub")),
            FormField("dataset.files.train", "Train file", when(SOURCE, "files")),
            FormField("dataset.files.validation", "Validation file", when(SOURCE, "files")),
            FormField("dataset.text_column", "Text column", read_by_task("text_column")),
            FormField("dataset.text_pair_column", "Text pair column", read_by_task("text_pair_column")),
            FormField("dataset.label_column", "Label column", read_by_task("label_column")),
            FormField("dataset.question_column", "Question column", read_by_task("question_column")),
            FormField("dataset.context_column", "Context column", read_by_task("context_column")),
            FormField("dataset.answer_column", "Answer column", read_by_task("answer_column")),
            FormField("dataset.summary_column", "Summary column", read_by_task("summary_column")),
            FormField("dataset.prompt_template", "Prompt template", read_by_task("prompt_template")),
            FormField("dataset.max_length", "Max length"),
            FormField("dataset.max_target_length", "Max target length", read_by_task("max_target_length")),
            FormField("dataset.doc_stride", "Doc stride", read_by_task("doc_stride")),
            FormField("dataset.max_train_samples", "Max train samples"),
            FormField("dataset.pad_to_max_length", "Pad to max length"),
        ),
    ),
    Section(
        "Adapter",
        (
            FormField(ADAPTER, "Train"),
            FormField("adapter.r", "Rank r", WITH_ADAPTER),
            FormField("adapter.alpha", "Alpha", WITH_ADAPTER),
            FormField("adapter.dropout", "Dropout", WITH_ADAPTER),
        ),
    ),
    Section(
        "Hardware",
        (
            FormField("hardware.target", "Target"),
            FormField("hardware.accelerator", "Accelerator"),
            FormField(
                "hardware.instance_type",
                "Instance type",
                lambda values: values.get("hardware.target") != "local" or values.get("hardware.accelerator") != "cpu",
            ),
            FormField("hardware.devices", "Devices per node"),
            FormField("hardware.nodes", "Nodes"),
            FormField("hardware.node_rank", "This node's rank", multi_node_here),
            FormField("hardware.master_addr", "Master address", multi_node_here),
        ),
    ),
    Section(
        "Parallelism",
        (
            FormField("launcher", "Launcher"),
            FormField("parallelism.strategy", "Strategy"),
            FormField("parallelism.zero_stage", "ZeRO stage", DEEPSPEED),
            FormField("parallelism.offload_optimizer", "Offload optimizer", DEEPSPEED),
            FormField("parallelism.offload_params", "Offload parameters", DEEPSPEED),
            FormField(
                "parallelism.nvme_path",
                "NVMe path",
                lambda values: (
                    DEEPSPEED(values)
                    and "nvme"
                    in (values.get("parallelism.offload_optimizer"), values.get("parallelism.offload_params"))
                ),
            ),
            FormField("parallelism.tensor_parallel_degree", "Tensor parallel", SMP),
            FormField("parallelism.pipeline_parallel_degree", "Pipeline parallel", SMP),
        ),
    ),
    Section(
        "Precision and compile",
        (
            FormField("precision", "Precision"),
            FormField("compile", "Compile"),
        ),
    ),
    Section("Tracking", (FormField("report_to", "Report to"),)),
    Section(
        "Hyperparameters",
        (
            FormField("train.epochs", "Epochs"),
            FormField("train.max_steps", "Max steps"),
            FormField("train.batch_size", "Batch size"),
            FormField("train.grad_accum", "Grad accumulation"),
            FormField("train.learning_rate", "Learning rate"),
            FormField("train.warmup", "Warm-up"),
            FormField("train.weight_decay", "Weight decay"),
            FormField("train.logging_steps", "Logging steps"),
            FormField("train.eval_steps", "Eval steps"),
            FormField("train.save_steps", "Save steps"),
            FormField("train.budget_usd", "Budget (USD)"),
            FormField("train.seed", "Seed"),
            FormField("train.gradient_checkpointing", "Gradient checkpointing"),
        ),
    ),
)


def block_section(name: str, block: type[BaseModel], applies: Callable[[Values], bool]) -> Section:
    """The block's fields that have a title, in its order, each shown when its `shown_when` (json_schema_extra)
    says; the section is titled by the block's own title and shown while `applies`."""
    fields = []
    for field_name, info in block.model_fields.items():
        shown_when = (info.json_schema_extra or {}).get("shown_when", {})
        field_applies = next((when(f"{name}.{key}", value) for key, value in shown_when.items()), always)
        if info.title:
            fields.append(FormField(f"{name}.{field_name}", info.title, field_applies))
    return Section(block.model_config.get("title") or name, tuple(fields), applies)


def backend_sections() -> tuple[Section, ...]:
    """A section per remote engine's block, shown when the target is that engine (a plugin's block too)."""
    return tuple(
        block_section(backend.name, backend.block, when("hardware.target", backend.target))
        for backend in backends.registered().values()
        if backend.block is not None and backend.target != backends.LOCAL
    )


def task_sections() -> tuple[Section, ...]:
    """A section per task's own spec block (`preference:`, `reward:`), shown while that task is chosen."""
    sections = []
    for task in TASKS.values():
        block = task.block and block_model(task.block)
        if task.block and block is not None:
            sections.append(block_section(task.block, block, when("task", task.name)))
    return tuple(sections)


SECTIONS: tuple[Section, ...] = (*CORE_SECTIONS, *task_sections(), *backend_sections())
FIELDS: dict[str, FormField] = {field.path: field for section in SECTIONS for field in section.fields}
#: what the form decides; everything else in a prefilled spec passes through untouched
OWNED = (*FIELDS, "dataset.files", "adapter.type")
