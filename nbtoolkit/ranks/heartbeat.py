"""What every rank of a running job writes and reads in its job folder as it steps: its heartbeat, and
the request to save a checkpoint now. Light (no torch): the training program, autolog and
`nbtoolkit.log` write through it; the runner and views read it.

A heartbeat is `ranks/rank-N.json`: step, time of the last step, seconds per step, host, pid, memory.
A rank's step only notes the step and its time; a thread replaces the file by an atomic rename at most
every `BEAT_EVERY_S`, so a reader never sees half a file and a run of thousands of steps a second
pays nothing for it.

A checkpoint request is `checkpoint-request.json`. Ranks must save at the same step (a DeepSpeed save
is a collective), and they see the file at different moments; so rank 0 alone answers a new request
by naming the step to save at, `CHECKPOINT_LEAD_STEPS` ahead. Ranks that meet in a collective every
step are at most one step apart, so every rank reads that step before it reaches it.

Both files are read as untrusted input: anything that can write the job folder can write them, and every rank
acts on the request. A file of the wrong type, size or kind (a FIFO, a symlink) is ignored, the request with
one warning line from rank 0 that names it; it never ends the job. Requests made while one still waits for its
save (twenty clicks on "Checkpoint now") are that one request: one checkpoint.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import fcntl
import functools
import json
import math
import os
import shutil
import socket
import stat
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

RANKS_DIR = "ranks"
REQUEST_FILE = "checkpoint-request.json"
#: a rank rewrites its heartbeat at most this often (a step that takes longer writes once per step); a write
#: takes about 0.4 ms of CPU here (memory, JSON, a file and a rename): 0.04% of a core
BEAT_EVERY_S = 1.0
#: how many steps after rank 0 reads a checkpoint request the ranks save (with more than one rank)
CHECKPOINT_LEAD_STEPS = 2
#: checkpoints kept out of the Trainer's save_total_limit rotation (saved on request, forked from), in the output
KEPT_DIR = "kept"
#: a heartbeat or a request is a few hundred bytes; a bigger file is not one
MAX_FILE_BYTES = 64 * 1024


def rank() -> int:
    """This process's global rank: torchrun's and DeepSpeed's RANK, Slurm's SLURM_PROCID, else 0."""
    return int(os.environ.get("RANK") or os.environ.get("SLURM_PROCID") or 0)


def world_size() -> int:
    return int(os.environ.get("WORLD_SIZE") or os.environ.get("SLURM_NTASKS") or 1)


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Replace `path` whole: write a temporary file beside it, then rename over it. The temporary file is this
    writer's alone (a random name): the server's request threads share one pid, and a name by pid let one
    thread's rename take the file another was still writing."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:12]}")
    try:
        temporary.write_text(json.dumps(data))
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


class UntrustedFile(ValueError):
    """A file in the job folder that is there but not one to act on; the message names it and says why."""


def load_stamped_json(path: Path) -> tuple[dict[str, Any], float] | None:
    """The JSON object in a regular file of at most `MAX_FILE_BYTES` and the file's mtime; None when there is no
    file, `UntrustedFile` when it is no such file: a FIFO or a device planted in the job folder would block a
    plain read (and with it a rank, the supervisor, `show` and the server); a symlink is not followed."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    except FileNotFoundError:
        return None
    except OSError as exc:
        why = "is a symlink, which is not followed" if exc.errno == errno.ELOOP else f"cannot be read ({exc.strerror})"
        raise UntrustedFile(f"{path} {why}") from None
    try:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode):
            raise UntrustedFile(f"{path} is not a regular file")
        if status.st_size > MAX_FILE_BYTES:
            raise UntrustedFile(f"{path} holds {status.st_size} bytes, more than the {MAX_FILE_BYTES} it may")
        try:
            data = json.loads(os.read(fd, MAX_FILE_BYTES))
        except OSError as exc:
            raise UntrustedFile(f"{path} cannot be read ({exc.strerror})") from None
        except (ValueError, RecursionError):  # JSON, UTF-8 (UnicodeDecodeError), and arrays nested too deep
            raise UntrustedFile(f"{path} is not JSON") from None
    finally:
        os.close(fd)
    if not isinstance(data, dict):
        raise UntrustedFile(f"{path} holds a JSON {type(data).__name__}, not an object")
    return data, status.st_mtime


def _memory() -> tuple[float | None, str]:
    """Device memory this rank holds (CUDA tensors), else its host memory (resident set), in MiB."""
    torch = sys.modules.get("torch")  # never imported for this: a custom loop without torch has none
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        return round(torch.cuda.memory_allocated() / 2**20, 1), "device"
    try:
        return round(_this_process().memory_info().rss / 2**20, 1), "host"
    except Exception:
        return None, "host"


@functools.cache
def _this_process():
    import psutil

    return psutil.Process()


class Heartbeat:
    """One rank's heartbeat: `beat(step)` after each step notes the step and its time (two assignments); a
    daemon thread writes the file when they changed, every `every_s`, so the last step before a hang is
    always on disk within `every_s` and the training loop never waits on a write."""

    def __init__(self, job_dir: str | Path, *, can_checkpoint: bool = False, every_s: float = BEAT_EVERY_S) -> None:
        self.rank = rank()
        self.path = Path(job_dir) / RANKS_DIR / f"rank-{self.rank}.json"
        self.path.parent.mkdir(exist_ok=True)
        self.every_s = every_s
        self.facts = {
            "rank": self.rank,
            "host": os.environ.get("NBTOOLKIT_HOST") or socket.gethostname(),  # as the job store names hosts
            "pid": os.getpid(),
            "started": time.time(),
            "can_checkpoint": can_checkpoint,
        }
        self.step: int | None = None
        self.time = 0.0
        self._writer: threading.Thread | None = None
        self._lock = threading.Lock()  # the thread and the exit hook
        self._written_step: int | None = None
        self._written_time = 0.0
        self._step_time: float | None = None

    def beat(self, step: int) -> None:
        self.step, self.time = step, time.time()
        if self._writer is None:
            self._writer = threading.Thread(target=self._keep_writing, daemon=True, name="nbtoolkit-heartbeat")
            self._writer.start()
            atexit.register(self.write)  # the last step of a run that ends within `every_s` of it

    def _keep_writing(self) -> None:
        while True:
            self.write()
            time.sleep(self.every_s)

    def write(self) -> None:
        """Write the heartbeat if a step came since the last write."""
        with self._lock:
            step, when = self.step, self.time
            if when == self._written_time:
                return
            if self._written_step is not None and step is not None and step > self._written_step:
                self._step_time = (when - self._written_time) / (step - self._written_step)
            memory, kind = _memory()
            with contextlib.suppress(OSError):  # a full disk loses a heartbeat, never the run
                write_json(
                    self.path,
                    {
                        **self.facts,
                        "step": step,
                        "time": when,
                        "step_time": None if self._step_time is None else round(self._step_time, 6),
                        "memory_mb": memory,
                        "memory_kind": kind,
                        "written": time.time(),  # with the file's mtime, this clock's skew (read_heartbeats)
                    },
                )
            self._written_step, self._written_time = step, when


def _count(value: Any, least: int) -> int | None:
    return value if type(value) is int and value >= least else None


def _number(value: Any) -> float | None:
    """A finite number, never NaN or infinity (they would crash the rules and make `show --json` invalid JSON)."""
    return float(value) if type(value) in (int, float) and math.isfinite(value) else None


#: a heartbeat's fields, each with what makes its value valid (an invalid one reads as None)
FIELDS = {
    "step": lambda v: _count(v, 0),
    "time": _number,
    "step_time": lambda v: None if (n := _number(v)) is None or n < 0 else n,
    "host": lambda v: v if isinstance(v, str) else None,
    "pid": lambda v: _count(v, 1),
    "started": _number,
    "memory_mb": _number,
    "memory_kind": lambda v: v if isinstance(v, str) else None,
    "can_checkpoint": lambda v: v is True,
}


def clean_heartbeat(found: tuple[dict[str, Any], float]) -> dict[str, Any]:
    """A heartbeat with a rank as written by any process that can write the job folder (with its file's mtime):
    each field of the wrong type or out of range None, and `time` on this host's clock.

    A rank's clock may run ahead of the reader's (another node): compared as written, its last step would
    seem to lie in the future and hide a hang. The file's mtime is stamped by the reader's filesystem when
    the rank wrote it, at the rank's `written`; their difference is the rank's skew. A step never comes
    after the write that reports it, so `time` is at most the mtime."""
    data, mtime = found
    beat = {"rank": data["rank"], **{name: valid(data.get(name)) for name, valid in FIELDS.items()}}
    if beat["time"] is not None:
        written = _number(data.get("written"))
        beat["time"] = min(beat["time"] - (written - mtime if written is not None else 0.0), mtime)
    return beat


def read_heartbeats(job_dir: str | Path, ignored: Callable[[str], None] = lambda why: None) -> list[dict[str, Any]]:
    """Every rank's last heartbeat, by rank; of two files naming the same rank, the newer. A file that is no
    heartbeat (see `load_stamped_json`; no rank in it) is skipped, and `ignored` hears why (the supervisor says it
    once in the log; the views, polling, skip it quietly)."""
    folder = Path(job_dir) / RANKS_DIR
    found = []
    for path in sorted(folder.glob("rank-*.json")) if folder.is_dir() else []:
        try:
            file = load_stamped_json(path)
        except UntrustedFile as exc:
            ignored(str(exc))
            continue
        if file is not None and _count(file[0].get("rank"), 0) is None:
            ignored(f"{path}: rank is {_shown(file[0].get('rank'))}, not a rank (an integer from 0)")
        elif file is not None:
            found.append(file)
    beats = (clean_heartbeat(file) for file in sorted(found, key=lambda file: file[1]))
    newest = {beat["rank"]: beat for beat in beats}
    return [newest[rank] for rank in sorted(newest)]


def _shown(value: Any) -> str:
    return json.dumps(value)[:40]


def read_request(path: Path) -> dict[str, Any] | None:
    """The checkpoint request in `path` (None without one), or `UntrustedFile` saying which field is wrong: the
    id a string of 1 to 64 characters, `at_step` a step (an integer from 0), `saved` a path."""
    found = load_stamped_json(path)
    if found is None:
        return None
    request = found[0]
    request_id = request.get("id")
    if not (isinstance(request_id, str) and 0 < len(request_id) <= 64):
        raise UntrustedFile(f"{path}: id is {_shown(request_id)}, not a request id (a string of 1 to 64 characters)")
    if "at_step" in request and _count(request["at_step"], 0) is None:
        raise UntrustedFile(f"{path}: at_step is {_shown(request['at_step'])}, not a step (an integer from 0)")
    if "saved" in request and not isinstance(request["saved"], str):
        raise UntrustedFile(f"{path}: saved is {_shown(request['saved'])}, not a checkpoint's path")
    return request


_REQUESTS_LOCK = threading.Lock()


@contextlib.contextmanager
def _requests_locked(path: Path) -> Iterator[None]:
    """One requester at a time, threads of a process (the server's) and processes (the CLI beside it) alike."""
    with _REQUESTS_LOCK:
        fd = os.open(path.with_name(f".{path.name}.lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # and with it the flock


def request_checkpoint(job_dir: str | Path) -> str:
    """Ask the running job to save a checkpoint at its next steps; returns the request's id. A request that still
    waits for its save answers for this one too (its id), so requests at once give one checkpoint, not one that
    silently replaced another; a file that is no valid request is replaced."""
    path = Path(job_dir) / REQUEST_FILE
    with _requests_locked(path):
        try:
            waiting = read_request(path)
        except UntrustedFile:
            waiting = None
        if waiting is not None and "saved" not in waiting:
            return waiting["id"]
        request_id = uuid.uuid4().hex[:8]
        write_json(path, {"id": request_id, "requested": time.time()})
    return request_id


def checkpoint_request(job_dir: str | Path) -> dict[str, Any] | None:
    """The job's checkpoint request, None without a valid one."""
    try:
        return read_request(Path(job_dir) / REQUEST_FILE)
    except UntrustedFile:
        return None


def _link_or_copy(source: str, target: str) -> None:
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def keep_checkpoint(checkpoint: Path) -> Path:
    """The checkpoint as `kept/checkpoint-N` beside it, out of the Trainer's rotation (it deletes the oldest
    `checkpoint-N` folders of the output beyond save_total_limit): hard links, so no bytes are copied and
    deleting the original leaves the kept one whole. Kept once; a checkpoint already kept is itself."""
    if checkpoint.parent.name == KEPT_DIR:
        return checkpoint
    kept = checkpoint.parent / KEPT_DIR / checkpoint.name
    if kept.is_dir():
        return kept
    kept.parent.mkdir(mode=0o700, exist_ok=True)  # as private as the checkpoints it holds
    partial = kept.with_name(f".{kept.name}.{os.getpid()}.{uuid.uuid4().hex[:6]}")
    try:
        shutil.copytree(checkpoint, partial, copy_function=_link_or_copy)
        os.rename(partial, kept)  # whole or not at all
    except OSError:
        shutil.rmtree(partial, ignore_errors=True)
        if not kept.is_dir():  # not kept meanwhile by another process: the original went away mid-copy
            raise
    return kept


def _is_empty(path: Path) -> bool:
    """An empty regular file (a FIFO or a device reads 0 bytes too, and is said)."""
    try:
        found = path.lstat()
    except OSError:
        return True
    return stat.S_ISREG(found.st_mode) and found.st_size == 0


class CheckpointRequests:
    """A rank's side of checkpoint requests: `due(step)` after each step says whether to save now."""

    def __init__(self, job_dir: str | Path) -> None:
        self.path = Path(job_dir) / REQUEST_FILE
        self.lead = CHECKPOINT_LEAD_STEPS if world_size() > 1 else 0
        self.is_rank_zero = rank() == 0
        self._seen_mtime: int | None = None
        self._request: dict[str, Any] | None = None
        self._saved_ids: set[str] = set()
        #: a requested save is due and not yet kept (`saved`)
        self.pending = False

    def due(self, step: int) -> bool:
        try:
            mtime = os.stat(self.path).st_mtime_ns  # one stat a step; the file is read only when it changed
        except OSError:
            return False
        if mtime != self._seen_mtime:
            self._seen_mtime, self._request = mtime, self._read()
        request = self._request
        if not request or request.get("id") in self._saved_ids:
            return False
        if "at_step" not in request:
            if not self.is_rank_zero:
                return False
            request["at_step"] = step + self.lead
            write_json(self.path, request)
            self._seen_mtime = os.stat(self.path).st_mtime_ns
        if step < request["at_step"]:
            return False
        self._saved_ids.add(request["id"])
        self.pending = True
        return True

    def _read(self) -> dict[str, Any] | None:
        """The request as it is now; one that is no valid request is ignored, and rank 0 says so in one line (an
        empty file quietly: a writer that truncates and then writes, as `write_text` does, is caught between)."""
        try:
            return read_request(self.path)
        except UntrustedFile as exc:
            if self.is_rank_zero and not _is_empty(self.path):
                print(f"[nbtoolkit] ignoring the checkpoint request: {exc}", file=sys.stderr, flush=True)
            return None

    def saved(self, checkpoint: Path) -> None:
        """Once every rank has written the requested checkpoint, rank 0 keeps it out of the rotation (a later
        save would delete it, and a fork from it with it) and says where it is."""
        request, self.pending = self._request, False
        if self.is_rank_zero and request and request.get("id") in self._saved_ids and "saved" not in request:
            with contextlib.suppress(OSError):
                request.update(saved=str(keep_checkpoint(checkpoint)), saved_time=time.time())
                write_json(self.path, request)
