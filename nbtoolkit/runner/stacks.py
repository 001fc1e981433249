"""The Python stack of every rank of a running job (py-spy, native frames where it can), grouped by identical
stacks: "ranks 0-6 in all_reduce, rank 7 in wait_for_data" explains a hang at a glance.

A job's ranks are the processes on this host that carry its tag (`tree`) and a rank in their
environment (torchrun, DeepSpeed and Slurm set RANK or SLURM_PROCID; a single-process job is rank 0).
Each dump is saved in the job folder (`stacks/`, the text report and py-spy's JSON); ranks on other
hosts are named, not dumped (py-spy must run where the process runs).
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from nbtoolkit.ranks.heartbeat import read_heartbeats
from nbtoolkit.runner.health import DoctorError
from nbtoolkit.runner.store import JobRecord, JobStore, this_host
from nbtoolkit.runner.tree import tagged_processes

STACKS_DIR = "stacks"
PY_SPY_TIMEOUT_S = 30.0
#: our own processes carry the job's tag too; they are not ranks
NOT_RANKS = ("nbtoolkit.runner.",)
#: a native frame's name is cut to this many characters (C++ template names run to thousands)
NATIVE_NAME_CHARS = 80


@dataclass
class RankStack:
    rank: int
    pid: int
    #: main thread's frames, innermost first: (function, file, line); native frames have line 0
    frames: list[tuple[str, str, int]] = field(default_factory=list)
    error: str | None = None

    @property
    def python_frames(self) -> tuple[tuple[str, str, int], ...]:
        return tuple(frame for frame in self.frames if frame[1].endswith(".py"))

    @property
    def where(self) -> str:
        """The innermost Python frame: the function the rank is in."""
        if self.error:
            return f"no stack ({self.error})"
        frames = self.python_frames or tuple(self.frames)
        return f"{frames[0][0]} ({frames[0][1]}:{frames[0][2]})" if frames else "no Python frame"


@dataclass
class StacksReport:
    job_id: str
    taken: float
    ranks: list[RankStack]
    elsewhere: list[str]
    path: Path | None = None

    def groups(self) -> list[list[RankStack]]:
        """Ranks with identical Python stacks together, the smallest group first (the odd one out leads)."""
        by_stack: dict[Any, list[RankStack]] = {}
        for stack in sorted(self.ranks, key=lambda s: s.rank):
            by_stack.setdefault(stack.error or stack.python_frames, []).append(stack)
        return sorted(by_stack.values(), key=lambda group: (len(group), group[0].rank))

    def summary(self) -> str:
        """One line: `rank 1 in wait_for_data (ranks.py:29); rank 0 in all_reduce (...)`."""
        return "; ".join(f"{rank_range([s.rank for s in group])} in {group[0].where}" for group in self.groups())

    def text(self) -> str:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.taken))
        lines = [
            f"stacks of job {self.job_id} at {stamp}: {len(self.ranks)} rank(s), main thread, innermost frame first",
            self.summary(),
        ]
        for group in self.groups():
            pids = ", ".join(str(s.pid) for s in group)
            lines.append(f"\n{rank_range([s.rank for s in group])} (pid {pids}) in {group[0].where}")
            lines += [f"    {name} ({where}{f':{line}' if line else ''})" for name, where, line in group[0].frames]
        lines += [f"\n{line}" for line in self.elsewhere]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.text()


def rank_range(ranks: list[int]) -> str:
    """[0, 1, 2, 3, 5] -> 'ranks 0-3, 5'; [7] -> 'rank 7'."""
    ranks = sorted(ranks)
    spans: list[list[int]] = []
    for rank in ranks:
        if spans and rank == spans[-1][1] + 1:
            spans[-1][1] = rank
        else:
            spans.append([rank, rank])
    text = ", ".join(f"{a}-{b}" if b > a else f"{a}" for a, b in spans)
    return f"{'ranks' if len(ranks) > 1 else 'rank'} {text}"


def py_spy() -> str:
    found = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(found).is_file():
        raise DoctorError("py-spy is not installed here; `pip install py-spy` lets nbtoolkit read the ranks' stacks")
    return found


def rank_processes(record: JobRecord, store: JobStore, beats: Sequence[dict[str, Any]] = ()) -> dict[int, int]:
    """rank -> pid of the job's ranks on this host, among its Python processes: by RANK (torchrun, DeepSpeed),
    else by SLURM_PROCID (srun started the ranks itself); a single-process job (no RANK) is rank 0. Of several
    processes of one rank (its DataLoader workers, a compiler it started, a Pool: they inherit RANK), the one its
    heartbeat names, else the topmost."""
    by_rank: dict[int, dict[int, int]] = {}  # rank -> {pid: parent pid}
    by_task: dict[int, dict[int, int]] = {}  # SLURM_PROCID -> {pid: parent pid}: only when no process has RANK
    loose: dict[int, int] = {}  # pid -> parent pid
    for process in tagged_processes(record.id, store.home):
        try:
            argv, environ, parent = process.cmdline(), process.environ(), process.ppid()
        except psutil.Error:
            continue
        # not ours, and Python only: srun's `bash node.sh` and a rank's gcc carry its variables too
        if not argv or "python" not in Path(argv[0]).name or any(marker in " ".join(argv) for marker in NOT_RANKS):
            continue
        rank, task = environ.get("RANK", ""), environ.get("SLURM_PROCID", "")
        if rank.isdigit():
            by_rank.setdefault(int(rank), {})[process.pid] = parent
        elif task.isdigit():  # srun started the ranks itself, or this is the torchrun above them
            by_task.setdefault(int(task), {})[process.pid] = parent
        else:
            loose[process.pid] = parent
    single = not by_rank and not by_task  # no launcher: the loose Python processes are rank 0 and its children
    beaten = {beat["rank"]: beat["pid"] for beat in beats}
    ranks: dict[int, int] = {}
    for number, processes in ({0: loose} if single else by_rank or by_task).items():
        topmost = sorted(pid for pid, parent in processes.items() if parent not in processes)
        if beaten.get(number) in processes:
            ranks[number] = beaten[number]
        elif len(topmost) == 1 or (topmost and not single):  # two unrelated loose processes: no guess
            ranks[number] = topmost[0]
    return ranks


def dump(pid: int) -> list[dict[str, Any]]:
    """py-spy's JSON dump of one process, with native frames if py-spy can unwind them here."""
    for extra in (["--native"], []):
        done = subprocess.run(
            [py_spy(), "dump", "--pid", str(pid), "--json", *extra],
            capture_output=True,
            text=True,
            timeout=PY_SPY_TIMEOUT_S,
        )
        if done.returncode == 0:
            return json.loads(done.stdout)
    raise DoctorError(why_no_stack(done.stderr or done.stdout, pid))


def why_no_stack(output: str, pid: int) -> str:
    """py-spy's own reason (its `Error:` line, not the Rust backtrace after it), and whether the process is
    stopped (SIGSTOP, a debugger): py-spy cannot suspend such a process."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    cause = next((line for line in lines if line.startswith("Error:")), lines[0] if lines else "py-spy failed")
    cause = cause.removeprefix("Error:").strip()
    with contextlib.suppress(psutil.Error):
        # stopped, or seen as tracing-stop while py-spy's attach is undone
        if psutil.Process(pid).status() in (psutil.STATUS_STOPPED, psutil.STATUS_TRACING_STOP):
            return f"its process is stopped (`kill -CONT {pid}` resumes it): {cause}"
    return cause


def main_thread_frames(threads: list[dict[str, Any]]) -> list[tuple[str, str, int]]:
    thread = next((t for t in threads if t.get("thread_name") == "MainThread"), threads[0] if threads else None)
    if thread is None:
        return []
    frames = []
    for frame in thread.get("frames", []):
        name = frame.get("name", "?")
        if name.startswith("0x"):
            continue  # an address py-spy could not name
        frames.append(
            (name[:NATIVE_NAME_CHARS], frame.get("short_filename") or frame.get("filename", "?"), frame["line"])
        )
    return frames


def take_stacks(store: JobStore, record: JobRecord) -> StacksReport:
    """Dump every rank of the running job on this host, save the report in the job folder, and return it."""
    if not record.active:
        raise DoctorError(f"job {record.id} is {record.status}: only a running job's ranks have stacks")
    beats = read_heartbeats(store.job_dir(record.id))
    ranks = rank_processes(record, store, beats)
    elsewhere = [  # a rank found here is here, whatever host name its heartbeat gives (NBTOOLKIT_HOST)
        f"rank {beat['rank']} runs on {beat['host']} (pid {beat['pid']}): run `py-spy dump --pid {beat['pid']}` there"
        for beat in beats
        if beat.get("host") != this_host() and beat["rank"] not in ranks
    ]
    if not ranks and not elsewhere:
        raise DoctorError(
            f"job {record.id} has no process of its own running on this host ({this_host()}); "
            "a remote engine's ranks are read where they run"
        )
    py_spy()
    taken = time.time()
    raw: dict[int, Any] = {}

    def one(rank: int, pid: int) -> RankStack:
        try:
            raw[rank] = dump(pid)
            return RankStack(rank, pid, main_thread_frames(raw[rank]))
        except (DoctorError, subprocess.TimeoutExpired, ValueError) as exc:
            return RankStack(rank, pid, error=str(exc) or type(exc).__name__)

    with ThreadPoolExecutor(max_workers=min(8, len(ranks) or 1)) as pool:
        stacks = list(pool.map(lambda item: one(*item), sorted(ranks.items())))
    report = StacksReport(record.id, taken, stacks, elsewhere)
    folder = store.job_dir(record.id) / STACKS_DIR
    folder.mkdir(exist_ok=True)
    name = time.strftime("stacks-%Y%m%d-%H%M%S", time.localtime(taken))
    (folder / f"{name}.json").write_text(json.dumps({str(rank): threads for rank, threads in raw.items()}))
    report.path = folder / f"{name}.txt"
    report.path.write_text(report.text() + "\n")
    return report
