"""A grpo run's reward models, checked on this machine before anything loads: each must be a one-output
sequence-classification model, or the job gives it a randomly initialised score head and trains on noise, silently.

A folder's config.json is read where it lies; a hub id's where `hf download` (or an earlier load) left it, in this
machine's Hugging Face cache, read offline (huggingface_hub's try_to_load_from_cache: no network call). A hub id not
in the cache cannot be checked: said as a warning while the hub is on, refused while it is off (the job could not
load it). `job:` entries are resolved (and checked) at launch. Light: no torch, no download.
"""

from __future__ import annotations

import json
from pathlib import Path

from nbtoolkit.inputs.hub_cache import cached_config, missing_offline
from nbtoolkit.lineage.chains import is_job_ref
from nbtoolkit.tasks import named_by
from nbtoolkit.trained_model.card import HUB_ID
from nbtoolkit.trained_model.saved_folders import config_folder


def reward_models_findings(spec) -> tuple[str | None, list[str]]:
    """(the first reward model the job could not score with, the hub ids whose kind cannot be checked here): one
    sentence each. Refused: an entry that is neither job:ID, a hub id nor a folder; a folder a remote backend's
    machines cannot read; a folder or cached hub model that is no one-output sequence classifier; a hub id not
    fetched while the hub is off."""
    scorers = named_by("scores_replies")  # the tasks whose jobs' models score replies: reward-model's
    unchecked = []
    for name in spec.reward.models if spec.reward else []:
        where = f"reward.models '{name}'"
        if is_job_ref(name):
            continue
        path = Path(name).expanduser()
        if not (path.exists() or name.startswith((".", "/", "~"))):  # a hub id
            if not HUB_ID.match(name):
                job = f"job:ID (a {scorers} job)" if scorers else "job:ID"
                return f"{where} is neither {job}, a hub id nor a folder on this machine", []
            config = cached_config(name)
            if config is None and spec.hardware.target == "local" and missing_offline(name):
                return f"{where} is not on this machine and the Hugging Face Hub is off here (HF_HUB_OFFLINE)", []
            if config is None:
                unchecked.append(name)
                continue
        elif spec.hardware.target != "local":
            return (
                f"{where} is a folder of this machine, which a {spec.hardware.target} job cannot read; push the "
                "model to the Hub (job.push_to_hub) and give its id"
            ), []
        else:
            config = config_folder(path) / "config.json"
            if not config.is_file():
                return (
                    f"{where} is not a model folder (no config.json); give the model folder of a "
                    "sequence-classification model with one output"
                ), []
        problem = not_a_scorer(where, json.loads(config.read_text()), scorers)
        if problem:
            return problem, []
    return None, [unchecked_sentence(unchecked)] if unchecked else []


def not_a_scorer(where: str, config: dict, scorers: str) -> str | None:
    """A model config that is no one-output sequence classifier: the job would score with a random head."""
    heads = [name for name in config.get("architectures") or [] if name.endswith("ForSequenceClassification")]
    outputs = len(config.get("id2label") or {}) or config.get("num_labels", 2)
    if heads and outputs == 1:
        return None
    kind = ", ".join(config.get("architectures") or []) or config.get("model_type", "unknown")
    trained_by = f", as task {scorers} trains" if scorers else ""
    return (
        f"{where} holds a {kind} model, not a reward model (a sequence-classification model with one output"
        f"{trained_by}); without that head it would score with random weights"
    )


def unchecked_sentence(names: list[str]) -> str:
    shown, one = ", ".join(f"'{name}'" for name in names), len(names) == 1
    return (
        f"reward.models {shown} {'is' if one else 'are'} not in this machine's Hugging Face cache, so whether "
        f"{'it' if one else 'each'} is a one-output sequence-classification model cannot be checked before launch "
        f"(a chat model would score with a random head); fetch {'it' if one else 'them'} first (hf download "
        f"{names[0]}) to have {'it' if one else 'them'} checked"
    )
