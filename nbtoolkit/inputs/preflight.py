"""The inputs a run reads, checked on this machine before anything starts: its model, its data files and the
modules its adapters name, the chat template a TRL run renders with, the `extra` keys its trainer takes, one
sentence each.

`plan` lists what it finds (and exits 1), `launch` refuses the spec on the first (so `run`, the form and
`%%finetune` do too); `plan` also warns of chat rows `dataset.max_length` cuts before their reply (a task's own
`check_lengths` for rows its tokenizer alone cannot render: vision-chat's image tokens), of reward-model pairs
longer than it (nbtoolkit.inputs.left_out_rows) and of hub reward models it cannot check
(nbtoolkit.inputs.reward_inputs). Before, a missing file, data without the task's columns or replies, a module
the model does not have or an unreachable model all passed `plan` and failed 20-30 s into the job. Only what this machine
can see is checked: a remote backend's machines read their own model and data. Light but for adapter targets
named by hand, which build the model on the meta device (no weights), for chat, preference and grpo runs,
which load the model's tokenizer (no weights): a template without `{% generation %}` markers failed 6 s into
the job, and for `extra`, which imports the task's config class (a misspelt key failed in the job).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from nbtoolkit.inputs.bundled import is_bundled
from nbtoolkit.inputs.data_files import check_files
from nbtoolkit.inputs.hub_cache import TRUE_VALUES, in_hub_cache, missing_offline
from nbtoolkit.inputs.left_out_rows import LeftOutRows, left_out_rows
from nbtoolkit.inputs.reward_inputs import reward_models_findings
from nbtoolkit.tasks import TASKS, TRL_TASKS, hook
from nbtoolkit.train.errors import TrainError
from nbtoolkit.trained_model.saved_folders import config_folder


def input_problems(spec) -> list[str]:
    """Every problem found in the spec's model, data, extra keys, adapter targets and chat template, as one
    sentence each."""
    return input_findings(spec)[0]


def input_findings(spec) -> tuple[list[str], list[str]]:
    """(what launch refuses, what plan warns of): one sentence each. The warnings: chat rows that `max_length` cuts
    before their first reply, which TRL drops; reward-model pairs longer than it, which TRL leaves out; hub reward models whose kind cannot be checked (not cached here)."""
    if spec.script is not None:  # a user's script reads its own inputs
        return [], []
    reward_models, unchecked = reward_models_findings(spec)
    found = [model_problem(spec), data_problem(spec), extra_key_problem(spec), reward_models]
    warned = list(unchecked)
    if not found[0]:
        template, cut = chat_template_and_cut(spec, check_lengths=not found[1])
        found += [target_modules_problem(spec), template]
        if cut is not None:
            (found if cut.every_row_lost else warned).append(cut.sentence(spec))
    return [problem for problem in found if problem], warned


def runs_here(spec) -> bool:
    """Whether the job's processes read this machine's files (the local launchers)."""
    return spec.hardware.target == "local"


def model_problem(spec) -> str | None:
    """A model this machine's job cannot load: a path that is not a saved model, or a hub id not fetched while the
    hub is off."""
    name = spec.model_name
    if is_bundled(name) or not runs_here(spec):
        return None
    path = Path(name).expanduser()
    if path.is_dir():
        if not (config_folder(path) / "config.json").is_file():
            return f"model {name} is a folder without config.json; give a folder saved by save_pretrained, or a hub id"
        return None
    if path.exists() or name.startswith((".", "/", "~")):
        return f"model {name} is not a model folder (it does not exist, or is a file); give a saved model's folder"
    if missing_offline(name):
        return (
            f"model '{name}' is not on this machine and the Hugging Face Hub is off here (HF_HUB_OFFLINE); "
            f"fetch it first (hf download {name}) or give a local model folder"
        )
    return None


def data_problem(spec) -> str | None:
    if spec.dataset.name and runs_here(spec):
        return hub_dataset_problem(spec.dataset.name)
    if not spec.dataset.files:  # on this machine wherever the job runs: read there, or carried to its machines
        return None
    try:
        check_files(spec)
    except TrainError as exc:
        return str(exc)
    return None


def hub_dataset_problem(name: str) -> str | None:
    """A hub dataset this machine's job cannot load: datasets is offline here (HF_DATASETS_OFFLINE, else
    HF_HUB_OFFLINE) and has no cached copy, where its load_dataset looks for one (CachedDatasetModuleFactory)."""
    offline = os.environ.get("HF_DATASETS_OFFLINE", os.environ.get("HF_HUB_OFFLINE", ""))
    if offline.upper() not in TRUE_VALUES or Path(name).expanduser().exists():
        return None
    from datasets import config
    from datasets.naming import camelcase_to_snakecase

    *namespace, dataset = name.split("/")
    cached = Path(config.HF_DATASETS_CACHE) / "___".join([*namespace, camelcase_to_snakecase(dataset)])
    if any(path.is_dir() for path in cached.glob("*/*/*")):
        return None
    return (
        f"dataset.name '{name}' is not cached on this machine and the Hugging Face Hub is off here "
        "(HF_DATASETS_OFFLINE or HF_HUB_OFFLINE); load it once online, or give local files in dataset.files"
    )


def model_files_here(name: str) -> bool:
    """Whether the model's config and tokenizer can be read on this machine (bundled, a folder, the hub cache)."""
    return is_bundled(name) or Path(name).expanduser().is_dir() or in_hub_cache(name)


def target_modules_problem(spec) -> str | None:
    """adapter.target_modules named by hand that the model has no linear layer of (all-linear always fits)."""
    if spec.adapter is None or not spec.adapter.target_modules:
        return None
    if not model_files_here(spec.model_name):
        return None  # the config is not here to read
    from nbtoolkit.train.adapters import missing_targets
    from nbtoolkit.train.models import model_config

    try:
        return missing_targets(spec, model_config(spec.model_name))
    except TrainError as exc:
        return str(exc)


def chat_template_and_cut(spec, check_lengths: bool) -> tuple[str | None, CutReplies | LeftOutRows | None]:
    """A TRL run's chat template that cannot train: none at all (a base model), or, with the loss on the
    assistant's turns, one without `{% generation %}` markers that TRL has no training version of (the job's own
    functions, nbtoolkit.train.chat_template, so the sentence is the one the job would print). Then, with
    `check_lengths` (the data passed its check), the chat rows `dataset.max_length` cuts before their reply, or the
    rows the trainer leaves out as longer than it (reward-model's pairs)."""
    own = TASKS[spec.task].check_lengths if spec.task in TASKS else ""
    if own:  # rows the tokenizer alone cannot render (vision-chat's images)
        return hook(own)(spec, check_lengths and model_files_here(spec.model_name))
    if spec.task not in TRL_TASKS or not model_files_here(spec.model_name):
        return None, None
    from nbtoolkit.train.chat_template import chat_tokenizer, loss_template

    try:
        tokenizer = chat_tokenizer(spec)
        template = loss_template(spec, tokenizer)
    except TrainError as exc:
        return str(exc), None
    except (OSError, ValueError):  # a tokenizer this machine cannot read (a hub cache with the config alone)
        return None, None
    try:
        return None, (
            cut_replies(spec, tokenizer, template) or left_out_rows(spec, tokenizer)
        ) if check_lengths else None
    except TrainError as exc:  # the template fails on a row it renders
        return str(exc), None


#: rows of a chat run's train file the length check tokenizes at most (the bundled tokenizer renders and
#: tokenizes about 2,000 short conversations a second here)
LENGTH_ROWS = 200


@dataclass(frozen=True)
class CutReplies:
    """Rows of a chat run's train file whose first reply starts at or past `dataset.max_length` tokens: TRL
    truncates them (keep_start) to their prompt alone and drops them; when every row goes, the job fails with an
    empty sampler (`num_samples=0`)."""

    where: str
    rows: int  # in the file
    checked: int  # tokenized: the first LENGTH_ROWS
    lost: int  # of those checked
    longest: int  # the longest prompt of those, in tokens before its first reply
    dropped: bool = True  # TRL drops such rows (text); a vision row is kept and trains nothing

    @property
    def every_row_lost(self) -> bool:
        return self.lost == self.checked == self.rows

    def sentence(self, spec) -> str:
        limit = spec.dataset.max_length
        rows = f"all {self.rows}" if self.every_row_lost else f"{self.lost} of the {self.checked}"
        checked = "" if self.checked == self.rows else f" first (of {self.rows})"
        what = (
            "so nothing trains"
            if self.every_row_lost
            else "and TRL drops them"
            if self.dropped
            else "and they train nothing"
        )
        return (
            f"{rows}{checked} rows of {self.where} lose every assistant turn at dataset.max_length {limit} (the "
            f"longest prompt runs {self.longest} tokens before its first reply), {what}; raise dataset.max_length "
            f"above {self.longest}, or shorten the prompts"
        )


def cut_replies(spec, tokenizer, template: str | None) -> CutReplies | None:
    """The train file's rows a `max_length` cut leaves without a token of reply, tokenized as TRL's SFT trainer
    tokenizes them (nbtoolkit.inputs.chat_preview.render); None when no row loses one, or nothing here to check (no local
    file, the loss on every token, packing, or keep_end truncation, which keeps the end)."""
    files = spec.dataset.files or {}
    split = spec.dataset.train_split
    if (
        template is None
        or split not in files
        or not runs_here(spec)
        or spec.dataset.packing
        or spec.extra.get("truncation_mode", "keep_start") != "keep_start"
    ):
        return None
    from nbtoolkit.inputs.chat_formats import detect_format, template_owner
    from nbtoolkit.inputs.chat_preview import render_row
    from nbtoolkit.inputs.data_files import rows

    path = Path(files[split]).expanduser()
    if path.suffix.lower() == ".parquet":
        return None
    where = f"dataset.files.{split} ({files[split]})"
    fmt = None
    prompts = []
    total = trained = 0
    for number, row in rows(path, where):
        total += 1
        if number <= LENGTH_ROWS:
            fmt = fmt or detect_format([key for key, value in row.items() if value is not None], spec.dataset.format)
            rendered = render_row(spec, tokenizer, "chat", fmt, row, number, template, every_token=False)
            prompts.append(rendered.prompt_tokens)
            trained += any(loss for _, loss in rendered.pieces)
    if prompts and not trained:  # TRL fails on it in the job ("may be missing the {% generation %} keyword")
        raise TrainError(
            f"no row of {where} has a token the loss is on: the chat template's ({template_owner(spec)}) "
            "{% generation %} blocks hold none of the assistant's replies; put each reply inside one, or set "
            "extra: {assistant_only_loss: false}"
        )
    return replies_cut(where, total, prompts, spec.dataset.max_length)


def replies_cut(where: str, rows: int, prompts: list[int], max_length: int, dropped: bool = True) -> CutReplies | None:
    """The cut of a file of `rows` rows whose first `len(prompts)` run these many tokens before their first reply;
    None when `max_length` leaves every one a token of reply."""
    lost = [tokens for tokens in prompts if tokens >= max_length]
    return CutReplies(where, rows, len(prompts), len(lost), max(lost), dropped) if lost else None


def extra_key_problem(spec) -> str | None:
    """An `extra` key the task's trainer arguments do not have (a typo passed plan and failed in the job). Checked
    against the classes installed here, so only for a job that runs here; not on Neuron (optimum-neuron's own)."""
    if not spec.extra or not runs_here(spec) or spec.hardware.accelerator == "neuron":
        return None
    import dataclasses

    from nbtoolkit.spec import closest_field
    from nbtoolkit.spec_parts.extra import set_by_field
    from nbtoolkit.train.task_setup import arguments_class

    try:
        config = arguments_class(spec)
    except ImportError:  # TRL not installed here: the job says so
        return None
    fields = [field.name for field in dataclasses.fields(config) if field.init]
    unknown = next((key for key in spec.extra if key not in fields), None)
    if unknown is None:
        return None
    close = closest_field("extra", unknown, fields)
    meant = close and set_by_field(spec.task).get(close.removeprefix("extra."), close)
    return (
        f"extra.{unknown} is not an argument of {config.__name__}, task {spec.task}'s trainer arguments"
        f"{f' (did you mean {meant}?)' if meant else ''}; fix its name or remove it"
    )
