"""A finished job's model: where it lives (a URI), and a folder on this machine when asked for one.

A job on this machine (or a cluster that shares its folders) leaves its model in the job folder's
`output/model`; a remote job leaves it where its engine keeps models (a SageMaker job's S3 model data),
recorded in the job's info as `model_uri` by the backend's follower. `fetch` brings a remote one into the
job's own `output/model`, so that merge, predict, Try it and push work on it as on a local job's: once
(the folder marks what it was fetched from), and atomically (a download cut short never counts).
"""

from __future__ import annotations

import fcntl
import json
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from nbtoolkit.backends import LaunchError, get_backend
from nbtoolkit.runner.store import JobRecord, JobStore
from nbtoolkit.trained_model.saved_folders import is_adapter_folder

#: the job's info key where a remote job's follower records where the engine keeps its model
MODEL_URI_KEY = "model_uri"
#: in a fetched model folder: the URI it came from (a folder with it is complete)
FETCHED_FROM = ".nbtoolkit-fetched.json"


@dataclass(frozen=True)
class ModelArtifact:
    """A succeeded job's final model: `uri` where it lives, `folder` where it is (or will be) on this machine."""

    job_id: str
    uri: str
    folder: Path
    backend: str
    #: the engine's region (a remote job's), for the backend that fetches it
    region: str | None = None

    @property
    def remote(self) -> bool:
        return not self.uri.startswith("file://")

    @property
    def here(self) -> bool:
        """Whether the folder holds the whole model: a local job's, or a fetch that finished."""
        if not self.remote:
            return self.folder.is_dir()
        marker = self.folder / FETCHED_FROM
        return marker.is_file() and json.loads(marker.read_text()).get("uri") == self.uri

    @property
    def adapter(self) -> bool:
        """Whether it is an adapter beside its base (known once it is here)."""
        return is_adapter_folder(self.folder)


def model_artifact(store: JobStore, record: JobRecord) -> ModelArtifact:
    """The job's final model; one sentence if the job has none (it did not succeed, or saved none)."""
    if record.status != "succeeded":
        raise LaunchError(f"job {record.id} is {record.status}; only a succeeded job has a final model")
    if not store.job_dir(record.id).is_dir():
        raise LaunchError(f"the job folder {store.job_dir(record.id)} no longer exists (job {record.id})")
    folder = store.job_dir(record.id) / "output" / "model"
    uri = record.info.get(MODEL_URI_KEY)
    if uri is None and not folder.is_dir():
        raise LaunchError(
            f"job {record.id} ({record.backend}) left no model that nbtoolkit knows of: its output/model folder "
            "is missing, and its backend recorded no model URI (a user's script saves its model where it chooses)"
        )
    return ModelArtifact(record.id, uri or folder.as_uri(), folder, record.backend, record.info.get("region"))


def fetch(artifact: ModelArtifact) -> Path:
    """The model's folder on this machine, fetched by the job's backend first if it is remote and not here yet.

    The backend downloads into a scratch folder beside the job's (checking what the engine's checksums allow);
    only a finished download is moved into place, with a marker naming its URI. One fetch at a time per job (a
    lock file): a second caller waits for the first and finds the model here.
    """
    if artifact.here:
        return artifact.folder
    download = getattr(get_backend(artifact.backend).module(), "fetch_model", None)
    if download is None:
        raise LaunchError(
            f"job {artifact.job_id}'s model is at {artifact.uri}, which the {artifact.backend} backend cannot fetch"
        )
    artifact.folder.parent.mkdir(parents=True, exist_ok=True)
    with (artifact.folder.parent / ".model.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if artifact.here:  # fetched by another caller while this one waited
            return artifact.folder
        scratch = Path(tempfile.mkdtemp(prefix=".model-", dir=artifact.folder.parent))
        try:
            download(artifact.uri, scratch, region=artifact.region)
            (scratch / FETCHED_FROM).write_text(json.dumps({"uri": artifact.uri}))
            if artifact.folder.exists():  # an earlier model of another URI (a partial one never gets here)
                shutil.rmtree(artifact.folder)
            scratch.rename(artifact.folder)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    return artifact.folder
