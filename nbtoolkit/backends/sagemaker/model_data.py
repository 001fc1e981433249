"""A SageMaker job's model data (`model.tar.gz` in S3): what a later SageMaker job reads, and its download here.

SageMaker tars /opt/ml/model into <output path>/<job name>/output/model.tar.gz when a job completes; a later
job gets it as an input channel (nbtoolkit.backends.sagemaker.job: MODEL_CHANNEL), a notebook downloads it
with `fetch_model`, checked against S3's size and, where the ETag is the object's MD5 (one part, not encrypted
with KMS or a customer key), its MD5; gzip's own CRC checks the rest as it unpacks.
"""

from __future__ import annotations

import hashlib
import tarfile
from pathlib import Path

from nbtoolkit.backends import LaunchError
from nbtoolkit.backends.sagemaker.aws_errors import explain

#: S3 reads a download in pieces of this size for the MD5 check
CHUNK = 1 << 20


def model_input(uri: str) -> str | None:
    """What a SageMaker spec's `model:` becomes for a model at `uri`: an S3 model it reads as an input channel;
    None for a model of this machine (its machines cannot read it)."""
    return uri if uri.startswith("s3://") else None


def fetch_model(uri: str, folder: Path, *, region: str | None = None) -> None:
    """Download the model.tar.gz at `uri` and unpack it into `folder` (the caller moves it into place)."""
    from botocore.exceptions import BotoCoreError, ClientError
    from tqdm.auto import tqdm

    from nbtoolkit.backends.sagemaker.submit import SubmitError, boto_session

    bucket, _, key = uri.removeprefix("s3://").partition("/")
    archive = folder / "model.tar.gz.part"
    action = f"download the model {uri}"
    try:
        s3 = boto_session(region).client("s3")
        head = s3.head_object(Bucket=bucket, Key=key)
        size = head["ContentLength"]
        with tqdm(total=size, unit="B", unit_scale=True, desc=f"model {Path(key).parent.parent.name}") as bar:
            s3.download_file(bucket, key, str(archive), Callback=bar.update)
    except SubmitError as exc:
        raise LaunchError(str(exc)) from None
    except (BotoCoreError, ClientError) as exc:
        raise LaunchError(explain(exc, action=action, needs="s3:GetObject on the job's output bucket")) from None
    check_download(archive, size, head.get("ETag", "") if etag_is_md5(head) else "", uri)
    try:
        with tarfile.open(archive) as tar:
            tar.extractall(folder, filter="data")
    except tarfile.FilterError as exc:
        raise LaunchError(
            f"the model {uri} holds a file it may not write ({exc}); SageMaker's own upload of /opt/ml/model never "
            "does: nothing was unpacked"
        ) from None
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise LaunchError(f"the model {uri} did not unpack ({exc}); fetch it again") from None
    archive.unlink()


def etag_is_md5(head: dict) -> bool:
    """S3's ETag is the object's MD5 only for a single-part upload stored unencrypted or with S3's own keys
    (SSE-S3); with KMS (SageMaker's output default where a key is set) or a customer key it is not."""
    return head.get("ServerSideEncryption") in (None, "AES256") and not head.get("SSECustomerAlgorithm")


def check_download(archive: Path, size: int, etag: str, uri: str) -> None:
    """The downloaded file is what S3 holds: its size, and its MD5 where `etag` is one (a single-part upload; ""
    when it is not an MD5 at all)."""
    got = archive.stat().st_size
    if got != size:
        raise LaunchError(f"the download of {uri} is {got} bytes, not S3's {size}; fetch it again")
    etag = etag.strip('"')
    if "-" in etag or not etag:  # a multipart upload's ETag is no MD5 of the whole
        return
    md5 = hashlib.md5(usedforsecurity=False)
    with archive.open("rb") as stream:
        while chunk := stream.read(CHUNK):
            md5.update(chunk)
    if md5.hexdigest() != etag:
        raise LaunchError(f"the download of {uri} does not match S3's checksum (MD5 {etag}); fetch it again")
