"""Secret values out of what a job's processes write. output.log passes the supervisor's scrubber as it is
written, rank by rank (`RankStreams`); the files they wrote beside it themselves (a launcher's per-rank logs,
error files) are scrubbed once their writers have ended, whatever their size: by the supervisor as each stage
ends, by the watcher when the job is lost. The outputs (checkpoints, models) are the program's and are left as
they are.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Callable
from pathlib import Path

from nbtoolkit.launching.credentials import Scrubber, references, secret_values
from nbtoolkit.launching.launch import Launch
from nbtoolkit.runner.store import LOG_FILE

#: the kinds of file scrubbed (text a process writes: logs, error files, records)
SCRUBBED_SUFFIXES = (".log", ".txt", ".json", ".jsonl")
#: how much of a file is read at a time: memory stays this, whatever the file's size
CHUNK_BYTES = 1 << 20
#: the prefix torchrun's tee writes before each piece a rank printed (TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE as
#: nbtoolkit's launches set it)
RANK_PIECE = re.compile(rb"\[rank\d{1,7}\]:")
#: the start of such a prefix, cut at a chunk's end
PARTIAL_PIECE = re.compile(rb"\[(?:r(?:a(?:n(?:k(?:\d{1,7}\]?)?)?)?)?)?\Z")


class RankStreams:
    """A launcher's output scrubbed rank by rank: torchrun's tee writes each piece it reads of a rank's output,
    whole line or not, after the rank's prefix, so a token two ranks print a character at a time reaches the log
    as `[rank0]:h[rank1]:h[rank0]:f...`, which no scrubber of the mixed stream can match. Each rank's pieces are
    rejoined into a stream of their own, scrubbed, and written after the prefix (once a line, while the rank's
    line goes on unbroken); a piece that may begin a secret waits for the rank's next one. Text outside any
    prefix (the launcher's own lines, a single process's output) is a stream of its own."""

    def __init__(self, scrubber: Scrubber) -> None:
        self.scrubber = scrubber
        self.streams: dict[bytes, Scrubber] = {}  # by prefix; b"": no prefix
        self.current = b""  # the prefix of the piece being read
        self.tail = b""  # a chunk's end that may begin a prefix
        self.open: bytes | None = None  # the prefix of the last text written, while its line goes on
        self.prefixed = False  # the last bytes read were a prefix: the tee writes no empty piece, so a prefix
        # right after one is the rank's own text (torch's C++ warnings begin `[rank0]:` themselves)

    def feed(self, chunk: bytes) -> bytes:
        data = self.tail + chunk
        cut = PARTIAL_PIECE.search(data, max(0, len(data) - 16))
        data, self.tail = (data[: cut.start()], data[cut.start() :]) if cut else (data, b"")
        out: list[bytes] = []
        start = 0
        for match in RANK_PIECE.finditer(data):
            if match.start() == start and self.prefixed:
                self.prefixed = False
                continue
            self._piece(data[start : match.start()], out)
            self.current, start, self.prefixed = match.group(), match.end(), True
        self._piece(data[start:], out)
        return b"".join(out)

    def flush(self) -> bytes:
        """The stream's end: every held tail, each after its prefix."""
        out: list[bytes] = []
        self._piece(self.tail, out)
        self.tail = b""
        for prefix, stream in self.streams.items():
            self._write(prefix, stream.flush(), out)
        return b"".join(out)

    def _piece(self, text: bytes, out: list[bytes]) -> None:
        """A piece of the current prefix's; after its line's end, the text is no rank's until the next prefix."""
        if text:
            self.prefixed = False
        line_end = text.rfind(b"\n") + 1
        for part in (text[:line_end], text[line_end:]) if line_end else (text,):
            if part:
                self._write(self.current, self._stream(self.current).feed(part), out)
            if part.endswith(b"\n"):
                self.current = b""

    def _stream(self, prefix: bytes) -> Scrubber:
        if prefix not in self.streams:
            self.streams[prefix] = self.scrubber.stream()
        return self.streams[prefix]

    def _write(self, prefix: bytes, text: bytes, out: list[bytes]) -> None:
        if not text:
            return
        out.append(text if self.open == prefix else prefix + text)
        self.open = None if text.endswith(b"\n") else prefix


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
    stream = scrubber.stream()
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
