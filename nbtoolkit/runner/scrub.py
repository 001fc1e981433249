"""Secret values out of the files a job's processes wrote beside its log themselves (a launcher's per-rank logs,
error files): output.log passes the supervisor's scrubber as it is written, these are scrubbed once their
writers have ended, whatever their size: by the supervisor as each stage ends, by the watcher when the job is
lost. The outputs (checkpoints, models) are the program's and are left as they are.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from nbtoolkit.credentials import Scrubber, references, secret_values
from nbtoolkit.launches import Launch
from nbtoolkit.runner.store import LOG_FILE

#: the kinds of file scrubbed (text a process writes: logs, error files, records)
SCRUBBED_SUFFIXES = (".log", ".txt", ".json", ".jsonl")
#: how much of a file is read at a time: memory stays this, whatever the file's size
CHUNK_BYTES = 1 << 20


def job_scrubber(job_dir: Path, environ: dict[str, str]) -> Scrubber:
    """The scrubber of the job in `job_dir`, for a process with `environ`: every credential-named variable of the
    job's environment, and every variable its `$NAME` references name (in its stages' argv, and in the spec's
    script args and extra, which the training program resolves itself)."""
    launch = Launch.from_dict(json.loads((job_dir / "launch.json").read_text()))
    environment = {**environ, **launch.env, **{k: v for stage in launch.stages for k, v in stage.env.items()}}
    names = [name for stage in launch.stages for name in references(stage.argv, {})]
    try:
        spec = json.loads((job_dir / "spec.json").read_text())
    except (OSError, ValueError):  # a launch without a spec (an attached remote job)
        spec = {}
    script = spec.get("script") or {}
    names += references(list(script.get("args") or []), spec.get("extra") or {})
    return Scrubber(secret_values(environment, names))


def scrub_job_files(job_dir: Path, scrubber: Scrubber, note: Callable[[str], None]) -> None:
    """Every text file under `job_dir` but the log and the outputs, scrubbed in place; `note` hears what failed."""
    if not scrubber:
        return
    for path in job_dir.rglob("*"):
        if (
            path.suffix not in SCRUBBED_SUFFIXES
            or path.name == LOG_FILE
            or path.is_relative_to(job_dir / "output")
            or path.is_symlink()
            or not path.is_file()
        ):
            continue
        try:
            scrub_file(path, scrubber)
        except OSError as exc:
            note(f"could not scrub {path.relative_to(job_dir)} ({exc})")


def scrub_file(path: Path, scrubber: Scrubber) -> bool:
    """Scrub one file in chunks (a secret cut across two is still found); rewritten, with its mode, only when it
    holds a secret. True if it did."""
    if not _holds_secret(path, scrubber):
        return False
    stream = Scrubber(secret.decode() for secret in scrubber.secrets)  # a stream of its own
    with open(path, "rb") as source, tempfile.NamedTemporaryFile(dir=path.parent, delete=False) as target:
        try:
            while chunk := source.read(CHUNK_BYTES):
                target.write(stream.feed(chunk))
            target.write(stream.flush())
            os.chmod(target.name, os.stat(path).st_mode & 0o7777)
        except BaseException:
            os.unlink(target.name)
            raise
    os.replace(target.name, path)
    return True


def _holds_secret(path: Path, scrubber: Scrubber) -> bool:
    assert scrubber.pattern is not None
    overlap = max(len(secret) for secret in scrubber.secrets) - 1
    tail = b""
    with open(path, "rb") as handle:
        while chunk := handle.read(CHUNK_BYTES):
            data = tail + chunk
            if scrubber.pattern.search(data):
                return True
            tail = data[len(data) - overlap :] if overlap else b""
    return False
