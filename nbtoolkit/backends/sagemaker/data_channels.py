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
#: the object metadata that records the content's hash (S3 returns it as x-amz-meta-sha256)
SHA256_METADATA = "sha256"


class DataChannels(NamedTuple):
    #: channel name -> the S3 folder SageMaker copies in
    channels: dict[str, str]
    #: split -> the S3 object its file is read from (two splits of the same content share one)
    objects: dict[str, str]
    #: S3 object URI -> the file on this machine it is uploaded from
    uploads: dict[str, str]


class DataChanged(ValueError):
    """A local data file is no longer the content its launch named; the message says which and what to do."""


def channel_name(split: str) -> str:
    return f"data-{split}"


def container_file(split: str, path: str) -> str:
    """Where the split's file lands below the container's input data folder."""
    return f"{channel_name(split)}/data{Path(path).suffix.lower()}"


def data_channels(files: dict[str, str], bucket: str) -> DataChannels:
    """The channels and uploads of a spec's local data files (hashing each file, once while it is unchanged; a
    missing file is preflight's sentence before render)."""
    channels, objects, uploads = {}, {}, {}
    for split, path in files.items():
        name, inside = container_file(split, path).split("/")
        folder = f"s3://{bucket}/{DATA_PREFIX}/{_sha256(*_identity(path))}-{inside.removeprefix('data.')}/"
        channels[name] = objects[split] = folder
        objects[split] += inside
        uploads[objects[split]] = path
    return DataChannels(channels, objects, uploads)


def content_hash(uri: str) -> str:
    """The SHA-256 an object's key names (`.../<sha256>-<format>/data.<format>`)."""
    return uri.rsplit("/", 2)[-2].partition("-")[0]


def upload(uploads: dict[str, str], s3, say=print) -> None:
    """Upload each file whose content is not in its bucket yet, with a progress bar. An object counts as there only
    when it records the hash its key names (SHA256_METADATA); the bytes sent are hashed as they are read, and an
    upload whose bytes are not the launch's (the file edited since) is deleted and refused (DataChanged)."""
    from botocore.exceptions import ClientError
    from tqdm.auto import tqdm

    for uri, path in uploads.items():
        bucket, _, key = uri.removeprefix("s3://").partition("/")
        wanted = content_hash(uri)
        try:
            if s3.head_object(Bucket=bucket, Key=key).get("Metadata", {}).get(SHA256_METADATA) == wanted:
                say(f"{path}: already in {uri}, not uploaded again")
                continue
        except ClientError as exc:
            # absent; or 403: absent to an identity without s3:ListBucket (the upload then says if it may write)
            if exc.response.get("Error", {}).get("Code") not in ("404", "NoSuchKey", "NotFound", "403"):
                raise
        bar = tqdm(
            total=Path(path).stat().st_size,
            unit="B",
            unit_scale=True,
            desc=f"uploading {Path(path).name}",
            file=sys.stderr,
            mininterval=1,
        )
        with bar, open(path, "rb") as handle:
            reader = HashingReader(handle)
            extra = {"Metadata": {SHA256_METADATA: wanted}}
            s3.upload_fileobj(reader, bucket, key, ExtraArgs=extra, Callback=bar.update)
        if reader.hexdigest() != wanted:
            s3.delete_object(Bucket=bucket, Key=key)
            raise DataChanged(
                f"{path} changed after the launch read it (its content is no longer the one planned and hashed); "
                "nothing was started: launch again to train on the file as it is now"
            )
        say(f"{path}: uploaded to {uri}")


class HashingReader:
    """A file read once, front to back, hashing what it gives (no seek: the transfer reads it in order)."""

    def __init__(self, handle) -> None:
        self.handle, self.digest = handle, hashlib.sha256()

    def read(self, size: int = -1) -> bytes:
        block = self.handle.read(size)
        self.digest.update(block)
        return block

    def hexdigest(self) -> str:
        return self.digest.hexdigest()


def _identity(path: str) -> tuple[str, int, int, int, int]:
    """What changes when a file does: a write moves the inode's change time, which no tool can set back."""
    stat = Path(path).stat()
    return path, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino


@lru_cache(maxsize=64)
def _sha256(path: str, *_identity: int) -> str:
    """The file's SHA-256, kept while it is unchanged (plan, render and submit each ask)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
