"""The task registry: every fact the rest of the code asks of a task, read by the spec, the training program, the
planner, the previews, the model card, adapters, predict, Try it, the run doctor and the rehearsal alike.

A task is one package, `nbtoolkit/tasks/<task>/`: its `TASK` (a `Task`, light: no model libraries), its training
setup (`train.py`), its answering function, whatever hooks its facts name, and any sample data and tiny model of
its own (`assets/`). Packages register through the entry-point group `nbtoolkit.tasks` (nbtoolkit's own in its
pyproject.toml), so another distribution can add a task without touching nbtoolkit; the core reads a task's fields
and never tests its name (tests/test_task_boundary.py). Each task is checked as the registry is built: one with a
fact missing or wrong (a module that is not installed, a head, Try-it mode or spec block outside the core's closed
sets) is refused in one sentence, not at predict or push time. A package that fails to load is named in a
warning and left out (as a backend is); two tasks of one name are refused.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import string
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, NamedTuple, get_args

from nbtoolkit import plugins

ENTRY_POINT_GROUP = "nbtoolkit.tasks"
#: nbtoolkit's bundled samples, a folder each (a task's `sample_data`)
SAMPLES = Path(__file__).resolve().parents[1] / "assets" / "data"

#: which models can do a task, as the pairing check reads a model's config
Head = Literal["sequence-classification", "question-answering", "seq2seq", "causal-lm", "image-text-to-text"]
#: how the Try-it box asks: one text, a question with its context, or a chat (the history goes with each message)
TryIt = Literal["text", "question-and-context", "chat", "chat-with-images"]
#: the spec blocks a task may read alone: RunSpecCore's own fields of these names (nbtoolkit.spec; the registry
#: cannot import the spec, which imports it: tests/test_task_registry.py holds the two equal)
TASK_BLOCKS = ("preference", "reward")


@dataclass(frozen=True)
class TaskWorkload:
    """What a task's training step runs beyond one forward and backward pass of its samples: the planner counts it
    (a task's `workload` hook returns it for a spec)."""

    #: tokens generated for each prompt and then trained on with it (GRPO's completions)
    completion_tokens: int = 0
    #: a frozen copy of the model scores every sequence (DPO and KTO; GRPO with a KL term)
    reference_model: bool = False
    #: models that score every completion (GRPO's reward.models)
    reward_models: tuple[str, ...] = ()
    #: each sample's image goes through the model's vision tower, frozen (vision-chat); other tasks read text only
    frozen_vision_tower: bool = False


class TinyModel(NamedTuple):
    """A bundled tiny model (trains in seconds on CPU): built at run time from a config with random weights."""

    #: its tokenizer's folder (a processor's for a vision-language model): a name under nbtoolkit/assets/tokenizers,
    #: or the folder itself for a task's own model (in the task's `assets`)
    tokenizer: str | Path
    model_type: str  # transformers config type
    sizes: dict[str, Any]  # config fields; a composite model's language model in text_config
    #: config field -> the token whose id it holds (a vision-language model's image tokens), read from the tokenizer
    tokens: dict[str, str] = {}  # noqa: RUF012 (a NamedTuple default: never mutated)


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
    #: the training program's module that sets the task up (`setup(spec, splits) -> TaskSetup`, optional
    #: `config_class(spec)`): the task's own `train.py`
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
    try_it: TryIt = "text"
    #: trained by TRL's trainers (the distribution's `chat` extra); their data formats are nbtoolkit.inputs.chat_formats
    trl: bool = False
    #: its rows are conversations in one of the chat formats (nbtoolkit.inputs.chat_formats: `dataset.format` says which),
    #: the loss on the assistant's turns unless `extra.assistant_only_loss` is false
    conversations: bool = False
    #: the dataset block's fields it alone reads beyond its columns (the form shows them for it only)
    dataset_fields: tuple[str, ...] = ()
    #: the columns each row needs, for a task that reads fixed columns rather than spec-named ones
    row_columns: tuple[str, ...] = ()
    #: sequences the model reads per example (a preference pair: 2), for the planner's activations and time
    sequences_per_sample: int = 1
    #: `module:function` (spec) -> TaskWorkload: what else its step runs, for the planner ("": nothing else)
    workload: str = ""
    #: the bundled sample data it trains on when the spec names none (nbtoolkit/assets/data/<folder>; "": its name),
    #: unless it brings its own in `assets`
    sample_data: str = ""
    #: its own assets folder, in its package (shipped in the wheel with it): its sample data in data/ (in place of
    #: `sample_data`) and its tiny model's tokenizer; None: it uses nbtoolkit/assets
    assets: Path | None = None
    #: its own bundled model, named `bundled_model`, for a model no task of nbtoolkit/assets trains (its tokenizer a
    #: folder in `assets`); None: `bundled_model` is one of nbtoolkit.inputs.bundled's
    tiny_model: TinyModel | None = None
    #: trainer argument -> the spec field that sets it, beyond every task's (nbtoolkit.spec_parts.extra); `extra` may not
    #: set them
    set_by_field: dict[str, str] = field(default_factory=dict)
    #: `module:function` (row, its number, dataset block, the file's name, folder) -> the files the row names (made
    #: from `folder`), raising DataError in one sentence for a row of a local data file the task cannot read, before
    #: launch; each named file is looked for ("": the checks of `columns`, `conversations` or `row_columns`)
    check_row: str = ""
    #: `module:function` (spec, check_rows) -> (refusal or None, nbtoolkit.inputs.preflight.CutReplies or None): the
    #: pre-launch length check for rows the chat template alone cannot render, `check_rows` when the data passed its
    #: check ("": the TRL tasks' own, nbtoolkit.inputs.preflight.cut_replies)
    check_lengths: str = ""
    #: the spec block only this task reads (`preference:`, `reward:`); another task's spec may not set it
    block: str | None = None
    #: `module:function` (spec) -> the spec's problem for this task in one sentence, or None; run as a spec is built,
    #: so keep its module light ("": no rules of its own)
    spec_rule: str = ""
    #: `module:function` (spec, tokenizer, row) -> the row's length in tokens when the trainer leaves the row out (TRL's
    #: RewardTrainer: a pair longer than dataset.max_length), else None; the plan counts them before launch ("": the
    #: trainer leaves no row out by its length)
    rows_left_out: str = ""
    #: its evaluation generates (summarization's ROUGE) unless `train.predict_with_generate` says no; not on Neuron
    evaluation_generates: bool = False
    #: the program joins its texts into blocks of `dataset.max_length` tokens (nothing is cut; a rehearsal's sample
    #: rows must be long enough to fill one)
    packs_texts: bool = False
    #: `module:function` (spec, sample, used columns, tokenizer) -> the data preview's token lengths per side, as the
    #: program tokenizes them; the TRL tasks' previews template their rows instead (nbtoolkit.inputs.chat_preview)
    preview_lengths: str = ""
    #: `module:function` (spec, sample) -> (format in words, columns read, rendered rows, warning or None): the data
    #: preview's rendering for rows the chat template alone cannot render (a vision-language task's images through its
    #: processor); "": nbtoolkit.inputs.chat_preview's, for the TRL tasks
    preview_sample: str = ""
    #: what the data preview says of its lengths (formatted with `data`, the spec's dataset block)
    preview_note: str = ""
    #: its loss stays about 0 by design (GRPO's advantages sum to 0): the run doctor does not call it stuck
    loss_near_zero: bool = False
    #: it logs rewards: the run doctor says when none is logged
    logs_rewards: bool = False
    #: its model scores a reply (one output): GRPO's `reward.models` may name its jobs
    scores_replies: bool = False
    #: pip requirements its training needs beyond nbtoolkit's floor (nbtoolkit.train.supported_versions), e.g.
    #: "transformers>=5.18.0": a container installs them in place of the floor's line for that library
    requires: tuple[str, ...] = ()
    #: where it stands in the form's list and the spec schema's enum (nbtoolkit's own: 10, 20, ...; then by name)
    listed: int = 1000

    @property
    def sample_folder(self) -> Path:
        """Where the sample it trains on when the spec names no data lies: its own assets', else nbtoolkit's."""
        return self.assets / "data" if self.assets is not None else SAMPLES / (self.sample_data or self.name)


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
#: the facts that name a function as `module:function`
HOOKS = ("answer", "workload", "spec_rule", "check_row", "preview_lengths", "preview_sample")
CALLABLE = re.compile(r"^[\w.]+:\w+$")
#: the one name `preview_note` is formatted with (nbtoolkit.inputs.data_preview: the spec's dataset block)
PREVIEW_NOTE_FIELDS = ("data",)


def check_task(task: Task) -> Task:
    """The task, or TaskError naming the first fact it lacks."""
    for name, meaning in FACTS.items():
        if not getattr(task, name):
            raise TaskError(f"task '{task.name}' has no {name} ({meaning}); add it where the task is defined")
    if not task.trl and not task.preview_lengths:
        raise TaskError(
            f"task '{task.name}' has no preview_lengths (the module:function that measures its rows' tokens for the "
            "data preview); add it where the task is defined"
        )
    for name in HOOKS:
        reference = getattr(task, name)
        if reference and not CALLABLE.match(reference):
            raise TaskError(f"task '{task.name}': {name} '{reference}' is not a module:function")
    for name in ("program", *HOOKS):
        module = getattr(task, name).partition(":")[0]
        if module and not _findable(module):
            raise TaskError(
                f"task '{task.name}': {name} '{getattr(task, name)}' names the module {module}, which is not "
                "installed here; name a module of the task's package"
            )
    for name, value, allowed in (("head", task.head, get_args(Head)), ("try_it", task.try_it, get_args(TryIt))):
        if value not in allowed:
            raise TaskError(f"task '{task.name}': {name} '{value}' is not one of {', '.join(allowed)}")
    if task.block is not None and task.block not in TASK_BLOCKS:
        raise TaskError(
            f"task '{task.name}': block '{task.block}' is not a block of the spec; a task may read one of "
            f"{' or '.join(TASK_BLOCKS)} alone, or none (block=None)"
        )
    if not isinstance(task.sequences_per_sample, int) or task.sequences_per_sample < 1:
        raise TaskError(
            f"task '{task.name}': sequences_per_sample {task.sequences_per_sample!r} is not a whole number of at "
            "least 1 (the sequences the model reads per example: a preference pair 2, else 1)"
        )
    _check_preview_note(task)
    _check_requires(task)
    if task.assets is not None and not any(task.sample_folder.glob("*.jsonl")):
        raise TaskError(
            f"task '{task.name}': its assets folder {task.assets} has no data/*.jsonl (the sample it trains on when "
            "the spec names no data); add them, or leave assets out to use nbtoolkit's"
        )
    if task.assets is None and not any(task.sample_folder.glob("*.jsonl")):
        bundled = sorted(folder.name for folder in SAMPLES.iterdir() if any(folder.glob("*.jsonl")))
        raise TaskError(
            f"task '{task.name}': sample_data '{task.sample_data or task.name}' is no sample of nbtoolkit's (the one "
            f"it trains on when the spec names no data); name one of {', '.join(bundled)}, or bring its own in assets"
        )
    own_tokenizer = task.tiny_model and task.tiny_model.tokenizer
    if isinstance(own_tokenizer, Path) and not (own_tokenizer / "tokenizer.json").is_file():
        raise TaskError(
            f"task '{task.name}': its tiny model's tokenizer folder {own_tokenizer} has no tokenizer.json; save the "
            "tokenizer (or processor) there"
        )
    return task


def _findable(module: str) -> bool:
    """Whether the module can be imported, without importing it (only the packages above it: the task's own)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a package above it is missing, or is no package
        return False


def _check_preview_note(task: Task) -> None:
    try:
        names = {name for _, name, _, _ in string.Formatter().parse(task.preview_note) if name is not None}
    except ValueError as exc:  # an unmatched brace
        raise TaskError(
            f"task '{task.name}': preview_note is no format string ({exc}); write a literal brace as {{{{ or }}}}"
        ) from None
    unknown = sorted(name for name in names if re.split(r"[.\[]", name)[0] not in PREVIEW_NOTE_FIELDS)
    if unknown:
        raise TaskError(
            f"task '{task.name}': preview_note names {{{unknown[0]}}}, but it is formatted with "
            f"{', '.join(PREVIEW_NOTE_FIELDS)} alone (the spec's dataset block: e.g. {{data.max_length}})"
        )


def _check_requires(task: Task) -> None:
    if not task.requires:
        return
    from packaging.requirements import InvalidRequirement, Requirement  # only a task that requires something pays

    for line in task.requires:
        try:
            Requirement(line)
        except InvalidRequirement:
            raise TaskError(
                f"task '{task.name}': requires '{line}' is not a pip requirement (PEP 508); write one such as "
                "'transformers>=5.18.0'"
            ) from None


def registry(tasks) -> dict[str, Task]:
    """Tasks by name, each checked (check_task), in their listed order; a name given twice is refused."""
    found: dict[str, Task] = {}
    for task in tasks:
        if task.name in found:
            raise TaskError(f"task '{task.name}' is registered twice; uninstall one of the packages that register it")
        found[task.name] = check_task(task)
    return dict(sorted(found.items(), key=lambda item: (item[1].listed, item[0])))


def registered() -> tuple[dict[str, Task], dict[str, str]]:
    """Every task of the entry-point group whose package loads, checked, and the distribution that registers each.
    A package that fails to load, or a task that lacks a fact, is named in a warning and left out, so one broken
    plugin cannot break every spec; so is a second task of a name already taken (nbtoolkit's own tasks are read
    first, so a plugin cannot replace one)."""
    loaded: dict[str, Task] = {}
    distributions: dict[str, str] = {}
    for entry, task in plugins.loaded(ENTRY_POINT_GROUP, Task, "task"):
        try:
            loaded[entry.name] = check_task(task)
        except TaskError as exc:
            warnings.warn(f"{exc}; until then it is left out", stacklevel=2)
            continue
        distributions[entry.name] = entry.dist.name if entry.dist is not None else ""
    if not loaded:  # nbtoolkit's own always register: this install's metadata predates the group
        raise TaskError(
            f"no task is registered in the entry-point group {ENTRY_POINT_GROUP}: nbtoolkit's installed metadata is "
            "older than its source; install it again (make install, or pip install -e . in its checkout)"
        )
    return registry(loaded.values()), distributions


def hook(reference: str) -> Callable[..., Any]:
    """The function a task's `module:function` fact names, imported now (its module may be heavy)."""
    module, _, name = reference.partition(":")
    return getattr(importlib.import_module(module), name)


TASKS: dict[str, Task]
#: task -> the distribution whose entry point registers it (nbtoolkit-finetune for nbtoolkit's own): a job that
#: carries nbtoolkit alone has no other's (nbtoolkit.launching.shipping)
DISTRIBUTIONS: dict[str, str]
TASKS, DISTRIBUTIONS = registered()
#: the tasks TRL trains (the distribution's `chat` extra)
TRL_TASKS: tuple[str, ...] = tuple(name for name, task in TASKS.items() if task.trl)
TASK_NAMES: tuple[str, ...] = tuple(TASKS)


def named_by(fact: str) -> str:
    """The registered tasks that state a fact (`scores_replies`), as a sentence names them ("a or b"; "" for none):
    a sentence names the task that does something, never a task the install may not have."""
    return " or ".join(name for name, task in TASKS.items() if getattr(task, fact))


def columns_used(task: str, dataset) -> dict[str, str]:
    """Spec field -> the column a spec's dataset block reads for the task (optional fields it leaves out)."""
    chosen = {field: getattr(dataset, field) or default for field, default in TASKS[task].columns.items()}
    return {field: name for field, name in chosen.items() if name}
