"""A spec's local `dataset.files` as SageMaker input channels: uploaded once to the job's bucket by content.

Each file goes to `s3://<bucket>/nbtoolkit/data/<sha256>-<format>/data.<format>`: the key depends on the bytes
alone, so a second launch with the same file finds it there and uploads nothing, and an edited file is a new
object (a running job never sees its data change). Each split is a channel of its own (`data-<split>`) whose
folder SageMaker copies to /opt/ml/input/data/data-<split>/; the shipped spec names the file relative to that
folder and the entry script passes the folder to the program (`--data-dir`).
"""

from __future__ import annotations

import hashlib
import re
import sys
from functools import lru_cache
from pathlib import Path
from typing import NamedTuple

#: where uploaded data lives in the job's bucket
DATA_PREFIX = "nbtoolkit/data"
#: SageMaker's folder of input channels in the container (the stand-in maps /opt/ml to a folder of its own)
INPUT_DATA_DIR = "/opt/ml/input/data"
#: SageMaker's channel names: letters, digits, '.', '-', '_' (at most 64; "data-" takes 5)
CHANNEL_NAME = re.compile(r"[A-Za-z0-9._-]{1,59}")


class DataChannels(NamedTuple):
    #: channel name -> the S3 folder SageMaker copies in
    channels: dict[str, str]
    #: S3 object URI -> the file on this machine it is uploaded from
    uploads: dict[str, str]


def channel_name(split: str) -> str:
    return f"data-{split}"


def container_file(split: str, path: str) -> str:
    """Where the split's file lands below the container's input data folder."""
    return f"{channel_name(split)}/data{Path(path).suffix.lower()}"


def data_channels(files: dict[str, str], bucket: str) -> DataChannels:
    """The channels and uploads of a spec's local data files (hashing each file, once while
    it is unchanged; a missing file is preflight's sentence before render)."""
    channels, uploads = {}, {}
    for split, path in files.items():
        name, inside = container_file(split, path).split("/")
        folder = f"s3://{bucket}/{DATA_PREFIX}/{_sha256(*_identity(path))}-{inside.removeprefix('data.')}/"
        channels[name] = folder
        uploads[folder + inside] = path
    return DataChannels(channels, uploads)


def upload(uploads: dict[str, str], s3, say=print) -> None:
    """Upload each file not yet in its bucket (by key: the key is the content's hash), with a progress bar."""
    from botocore.exceptions import ClientError
    from tqdm.auto import tqdm

    for uri, path in uploads.items():
        bucket, _, key = uri.removeprefix("s3://").partition("/")
        try:
            s3.head_object(Bucket=bucket, Key=key)
            say(f"{path}: already in {uri}, not uploaded again")
            continue
        except ClientError as exc:
            # absent; or 403: absent to an identity without s3:ListBucket (the upload then says if it may write)
            if exc.response.get("Error", {}).get("Code") not in ("404", "NoSuchKey", "NotFound", "403"):
                raise
        size = Path(path).stat().st_size
        bar = tqdm(
            total=size, unit="B", unit_scale=True, desc=f"uploading {Path(path).name}", file=sys.stderr, mininterval=1
        )
        with bar:
            s3.upload_file(path, bucket, key, Callback=bar.update)
        say(f"{path}: uploaded to {uri}")


def _identity(path: str) -> tuple[str, int, int]:
    stat = Path(path).stat()
    return path, stat.st_size, stat.st_mtime_ns


@lru_cache(maxsize=64)
def _sha256(path: str, size: int, mtime_ns: int) -> str:
    """The file's SHA-256, kept while its size and modification time are unchanged (plan, render and submit
    each ask)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
