"""`model: job:ID` (or `job:NAME`): a run that starts from an earlier job's model, resolved at launch.

Each backend names what its machines read for a model at a URI (`model_input` in its module): a launcher on
this machine, and a Slurm cluster (which shares nbtoolkit's job folders), the job's model folder, fetched
here first when the job ran remotely; a SageMaker job the earlier SageMaker job's S3 model data, as an input
channel, never a folder of this machine. An adapter job's model is its base plus the adapter: the next run
merges them as it loads. The new job records where its model came from (`model_from`), as forks do.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from nbtoolkit.backends import LaunchError, select
from nbtoolkit.runner.store import JOB_ID_PREFIX, JobRecord, JobStore
from nbtoolkit.spec import RunSpec, load_spec
from nbtoolkit.tasks import TASKS, named_by
from nbtoolkit.trained_model.artifacts import fetch, model_artifact

JOB_REF = "job:"
#: the job's info keys of its lineage: the job whose model it started from, and the spec's `model:` as written
MODEL_FROM = "model_from"
MODEL_REF = "model_ref"
#: ... and the jobs whose reward models a grpo job scores with
REWARD_MODELS_FROM = "reward_models_from"


@dataclass(frozen=True)
class ChainedSpec:
    """A spec with `model: job:...` resolved: `spec` for the machines, `sizing` for the planner (the model it
    names has the earlier job's shape), `info` the lineage the new job records."""

    spec: RunSpec
    sizing: RunSpec
    info: dict[str, Any]


def is_job_ref(model: str | None) -> bool:
    return model is not None and model.startswith(JOB_REF)


def job_refs(spec: RunSpec) -> list[str]:
    """The spec's fields that name an earlier job's model, resolved at launch, as `field 'job:...'`."""
    models = [f"model '{spec.model}'"] if is_job_ref(spec.model) else []
    return models + [
        f"reward.models '{name}'" for name in (spec.reward.models if spec.reward else []) if is_job_ref(name)
    ]


def earlier_job(ref: str, store: JobStore, field: str = "model") -> JobRecord:
    """The job `job:NAME` (the newest succeeded job of that name; a name matches first) or `job:ID` (an id or a
    unique prefix of one) names; `field` is the spec's field that names it, for the sentence a wrong one gets."""
    wanted = ref.removeprefix(JOB_REF).strip()
    if not wanted:
        raise LaunchError(f"{field} '{ref}' names no job; write job:ID or job:NAME (`nbtoolkit jobs` lists them)")
    records = store.list(limit=100_000)
    named = [record for record in records if record.name == wanted]
    if named:  # the newest succeeded, else the newest, whose status is the sentence model_artifact says
        return next((record for record in named if record.status == "succeeded"), named[0])
    by_id = [record for record in records if record.id.startswith(wanted)] if JOB_ID_PREFIX.match(wanted) else []
    if len(by_id) == 1:
        return by_id[0]
    if by_id:
        raise LaunchError(f"{field} '{ref}': {len(by_id)} jobs have ids starting '{wanted}'; give more of the id")
    raise LaunchError(f"{field} '{ref}': no job has that id or name; `nbtoolkit jobs` lists them")


def resolve(spec: RunSpec, store: JobStore, *, fetching: bool = True) -> ChainedSpec:
    """The spec as its backend's machines read it; a spec whose model and reward models name no job comes back as
    it is. Without `fetching` (a plan, a preview) a remote model that would be fetched first is not: `spec` is then
    `sizing`."""
    spec, reward_info = resolve_reward_models(spec, store, fetching=fetching)
    if not is_job_ref(spec.model):
        return ChainedSpec(spec, spec, reward_info)
    record = earlier_job(spec.model, store)
    succeeded(record, f"model '{spec.model}'", "start from", "job")
    artifact = model_artifact(store, record)
    if spec.adapter is not None and spec.adapter.type == "qlora" and adapter_job(store, record):
        raise LaunchError(
            f"adapter.type 'qlora' quantizes pretrained weights as they load, but model '{spec.model}' is job "
            f"{record.id}'s adapter, merged into its base at load; merge it first (`nbtoolkit merge {record.id}`) and "
            "start from the merged folder, or use type: lora"
        )
    sizing = spec.model_copy(update={"model": sizing_model(store, record, artifact.uri)})
    lineage = {MODEL_FROM: record.id, MODEL_REF: spec.model, **reward_info}
    model = machine_model(spec, f"model '{spec.model}'", record, artifact, fetching=fetching)
    if model is None:  # a remote model not fetched for a plan: a copy on this machine has its shape
        return ChainedSpec(sizing, sizing, lineage)
    return ChainedSpec(spec.model_copy(update={"model": model}), sizing, lineage)


def succeeded(record: JobRecord, what: str, use: str, kind: str) -> None:
    """One sentence, naming the field and what to do, when the job a field names has not succeeded (the model
    artifact's own sentence names neither)."""
    if record.status != "succeeded":
        wait = "wait for it to succeed (job.wait()) and launch again" if record.active else "train it again"
        raise LaunchError(
            f"{what}: job {record.id} is {record.status}, and only a succeeded job has a final model to {use}; "
            f"{wait}, or name a succeeded {kind} (`nbtoolkit jobs` lists them)"
        )


def machine_model(spec: RunSpec, what: str, record: JobRecord, artifact, *, fetching: bool) -> str | None:
    """What the spec's backend reads for the job's model (fetched here first where its machines read this
    machine's folders); None when that fetch is not wanted; one sentence when its machines cannot read it."""
    backend = select(spec)
    model = model_input(backend, artifact.uri)
    if model is None and artifact.remote and model_input(backend, artifact.folder.as_uri()) is not None:
        if not fetching:
            return None
        model = model_input(backend, fetch(artifact).as_uri())
    if model is None:
        raise LaunchError(
            f"{what}: job {record.id}'s model is at {artifact.uri}, which a {backend.name} job cannot read; start it "
            f"from a job that ran on {backend.target}, or push the model to the Hub (job.push_to_hub) and give its id"
        )
    return model


def resolve_reward_models(spec: RunSpec, store: JobStore, *, fetching: bool) -> tuple[RunSpec, dict[str, Any]]:
    """`reward.models` entries that name a reward-model job, as the backend's machines read that job's model; the
    jobs they came from, for the new job's lineage."""
    refs = [name for name in (spec.reward.models if spec.reward else []) if is_job_ref(name)]
    if not refs:
        return spec, {}
    models, sources = [], []
    for name in spec.reward.models:
        if not is_job_ref(name):
            models.append(name)
            continue
        record = earlier_job(name, store, "reward.models")
        trained = load_spec(store.job_dir(record.id) / "spec.json") if store.job_dir(record.id).is_dir() else None
        if trained is not None and not TASKS[trained.task].scores_replies:
            scorers = named_by("scores_replies")
            raise LaunchError(
                f"reward.models '{name}': job {record.id} trained task {trained.task}, not {scorers}; name a "
                f"{scorers} job, a hub id or a folder of a sequence-classification model with one output"
            )
        if trained is not None and trained.adapter is not None:
            raise LaunchError(
                f"reward.models '{name}': job {record.id} trained an adapter; merge it first (`nbtoolkit merge "
                f"{record.id}`) and give the merged folder"
            )
        succeeded(record, f"reward.models '{name}'", "score with", f"{named_by('scores_replies')} job")
        where = machine_model(spec, f"reward.models '{name}'", record, model_artifact(store, record), fetching=fetching)
        models.append(where or name)  # a plan keeps the reference where the model is not fetched
        sources.append(record.id)
    reward = spec.reward.model_copy(update={"models": models})
    return spec.model_copy(update={"reward": reward}), {REWARD_MODELS_FROM: sources}


def lineage(record: JobRecord) -> dict[str, Any]:
    """Where a job's model came from, for a fork or resume of it to record as its own."""
    return {key: record.info[key] for key in (MODEL_FROM, MODEL_REF) if key in record.info}


def in_default_store(spec: RunSpec, *, fetching: bool = True) -> ChainedSpec:
    """`resolve` against this user's job store, which is opened only when the spec names a job (an export or a
    preview of any other spec leaves no store behind)."""
    if not job_refs(spec):
        return ChainedSpec(spec, spec, {})
    return resolve(spec, JobStore(), fetching=fetching)


def adapter_job(store: JobStore, record: JobRecord) -> bool:
    """Whether the job trained an adapter (its model is an adapter beside its base)."""
    spec_file = store.job_dir(record.id) / "spec.json"
    return spec_file.is_file() and load_spec(spec_file).adapter is not None


def model_input(backend, uri: str) -> str | None:
    """What a spec's `model:` becomes on the backend for a model at `uri`: its module's `model_input`, else (a
    launcher of this machine) the folder a file URI names."""
    reads = getattr(backend.module(), "model_input", None)
    if reads is not None:
        return reads(uri)
    return local_folder(uri) if backend.target == "local" else None


def local_folder(uri: str) -> str | None:
    """The folder a `file://` URI names (what this machine's launchers read); None for any other URI."""
    return str(Path(unquote(urlparse(uri).path))) if uri.startswith("file://") else None


def sizing_model(store: JobStore, record: JobRecord, uri: str) -> str:
    """A model with the earlier job's shape that the planner can read offline: its own folder when here, else
    (a remote job's) the model that job started from, followed back along the chain; else its URI (an attached
    job's: unknown shape, which the planner says)."""
    folder = store.job_dir(record.id) / "output" / "model"
    spec_file = store.job_dir(record.id) / "spec.json"
    if folder.is_dir() or not spec_file.is_file():
        return str(folder) if folder.is_dir() else uri
    started = load_spec(spec_file).model_name
    parent = record.info.get(MODEL_FROM)
    if "://" in started and parent:
        return sizing_model(store, store.get(parent), started)
    return started
