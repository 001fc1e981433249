"""sky.jobs of the stand-in: launch answers job 7 (or raises $FAKE_SKY_LAUNCH_ERROR); tail_logs writes $FAKE_SKY_DIR/log.txt to the output
stream, then ends with $FAKE_SKY_END (an exit code of sky.exceptions.JobExitCode), or with `wait`
waits until the job is cancelled (103)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from sky import record_call

JOB_ID = 7


def _dir() -> Path:
    return Path(os.environ["FAKE_SKY_DIR"])


def launch(task, name=None, pool=None, num_jobs=None, job_group=None, _need_confirmation=False):
    # the secrets' names and lengths only: the calls file is a file, which holds no secret
    secrets = {key: len(value) for key, value in task.secrets.items()}
    record_call("launch", name=name, task=task.config, secrets=secrets, cwd=os.getcwd())
    workdir = task.config.get("workdir")  # as SkyPilot's launch validates it (Task.expand_and_validate_workdir)
    if workdir is not None and not os.path.isdir(os.path.abspath(os.path.expanduser(workdir))):
        raise ValueError(f"Workdir must be a valid directory (or a symlink to a directory). {workdir} not found.")
    if os.environ.get("FAKE_SKY_LAUNCH_ERROR"):  # e.g. sky.exceptions.ResourcesUnavailableError's text
        raise RuntimeError(os.environ["FAKE_SKY_LAUNCH_ERROR"])
    return [JOB_ID], None


def cancel(
    name=None, job_ids=None, all=False, all_users=False, pool=None, graceful=False, graceful_timeout=None, task=None
):
    record_call("cancel", job_ids=list(job_ids))
    (_dir() / "cancelled").touch()


def tail_logs(
    name=None,
    job_id=None,
    follow=True,
    controller=False,
    refresh=False,
    tail=None,
    tail_offset=None,
    output_stream=None,
    task=None,
    *,
    preload_content=True,
):
    record_call("tail_logs", job_id=job_id, follow=follow)
    for line in (_dir() / "log.txt").read_text().splitlines(keepends=True):
        print(line, flush=True, end="", file=output_stream)  # as sky.client.sdk.stream_response writes
    end = os.environ.get("FAKE_SKY_END", "0")
    if end != "wait":
        return int(end)
    while not (_dir() / "cancelled").exists():
        time.sleep(0.1)
    return 103
