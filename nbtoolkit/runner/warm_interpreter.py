"""A warm interpreter: a process that imported the training program's libraries before any job, from which each
local single-process job of nbtoolkit's own program forks its supervisor and its training stage.

About 3.3 s of a tiny local job's ~4 s from `launch()` to its first step went to importing transformers' Trainer
in a fresh interpreter (docs/development.md), paid again by every job. `submit` asks the warm interpreter made for
jobs like this one (`warm_key`: the same interpreter, nbtoolkit source, installed packages, environment and
hidden integrations) to fork the job's supervisor; that supervisor forks its stage instead of starting Python
again (forked_stage.py). Where none answers (the first such job, one still importing, `NBTOOLKIT_WARM=0`), the
supervisor starts as a new process, as before; `submit` then starts the interpreter for the next job. It ends
after `NBTOOLKIT_WARM_IDLE_S` seconds without a job (default IDLE_S).

Safe with CUDA and fork: an interpreter serves no job if its imports initialized CUDA or started a Python thread
(their native threads are forked as torch's DataLoader forks its workers), and the supervisor forks its stage
before it starts one. Each forked process shows what a process
started for the job shows: the job's tag in /proc/PID/environ (tree.tagged_processes reads it: stop, the watcher,
the doctor) and its own command line in /proc/PID/cmdline (`pkill -f JOB_ID`, the doctor's rank lookup): the
interpreter starts with room reserved in both (a padding variable and argument) and each fork writes its own there.

    python -m nbtoolkit.runner.warm_interpreter KEY TASK_MODULE HIDDEN PADDING      (started by `start`, not by hand)
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import gc
import hashlib
import json
import os
import signal
import socket
import stat
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

from nbtoolkit.launching.launch import JOB_DIR_ENV
from nbtoolkit.metrics.cost import BILLED_SINCE_ENV
from nbtoolkit.runner.forked_stage import memory_regions, write_command_line
from nbtoolkit.runner.tree import HOME_ENV, JOB_ID_ENV

MODULE = "nbtoolkit.runner.warm_interpreter"
#: `NBTOOLKIT_WARM=0` starts every job in a new interpreter, as nbtoolkit did before
SWITCH_ENV = "NBTOOLKIT_WARM"
IDLE_ENV = "NBTOOLKIT_WARM_IDLE_S"
IDLE_S = 600.0
#: where the interpreters listen: one socket per key, for this user only
SOCKETS = Path(tempfile.gettempdir()) / f"nbtoolkit-warm-{os.getuid()}"
#: room reserved in the interpreter's environment and command line for a forked process's own
SLOT_ENV = "NBTOOLKIT_WARM_SLOT"
SLOT_BYTES = 4096
#: a job's own variables, set in each forked process: they may differ from the interpreter's (nothing reads them
#: as it imports); any other difference starts the job's supervisor as a new process
PER_JOB = frozenset({HOME_ENV, JOB_ID_ENV, JOB_DIR_ENV, BILLED_SINCE_ENV, SLOT_ENV, "PWD", "OLDPWD", "_"})
#: pytest names the running test in the environment; the suite's jobs share interpreters across tests
PER_JOB_TESTING = frozenset({"PYTEST_CURRENT_TEST"})
#: seconds `adopt` waits for an interpreter's answer (a fork takes milliseconds; one that does not answer is
#: stopped or stuck, and its socket is removed so that no later launch waits for it)
ANSWER_S = 2.0
KEY_CHARS = 20
#: interpreters listening at once, at most: the one used longest ago ends when another starts
MOST = 4


@dataclass(frozen=True)
class WarmProfile:
    """What a run's program starts with that an interpreter must share: the integrations it hides (which fix what
    transformers finds installed as it is imported) and the task's training module (its own imports: TRL's
    trainers take 2.5-3 s)."""

    hidden: tuple[str, ...]
    task_module: str


def warm_key(env: dict[str, str], profile: WarmProfile) -> str:
    """What a job must share with an interpreter to fork from it: everything its imports could have read."""
    package = Path(__file__).resolve().parent.parent
    sources = max(path.stat().st_mtime_ns for path in package.rglob("*.py"))
    installed = Path(sysconfig.get_paths()["purelib"]).stat().st_mtime_ns  # pip changes the folder's entries
    shared = {name: value for name, value in env.items() if name not in PER_JOB | PER_JOB_TESTING}
    facts = [sys.executable, str(package), sources, installed, sorted(shared.items()), sorted(profile.hidden)]
    facts += [sorted(os.sched_getaffinity(0)), os.nice(0)]  # what a process inherits from the launching one
    facts.append(profile.task_module)
    return hashlib.sha256(json.dumps(facts).encode()).hexdigest()[:KEY_CHARS]


def enabled() -> bool:
    """Not switched off, on Linux, and with a temporary folder short enough for a socket's path (108 bytes)."""
    fits = len(os.fsencode(SOCKETS)) + len("/") + KEY_CHARS + len(".123456789.sock") < 108
    return os.environ.get(SWITCH_ENV, "1") != "0" and sys.platform.startswith("linux") and fits


def adopt(key: str, job_id: str, env: dict[str, str], job_dir: Path) -> tuple[int, float | None] | None:
    """Ask the interpreter for `key` to fork the job's supervisor with environment `env` (what a supervisor started
    anew would get); its (pid, start time), or None: none answered."""
    if not _private():
        return None
    request = {"job": job_id, "env": env, "dir": str(job_dir)}
    path = SOCKETS / f"{key}.sock"
    try:
        with _connect(path) as client:
            client.sendall(json.dumps(request).encode() + b"\n")
            answer = json.loads(client.makefile("rb").readline() or b"null")
    except TimeoutError:
        path.unlink(missing_ok=True)
        return None
    except (OSError, ValueError):
        return None
    return (answer["pid"], answer["started"]) if answer else None


def start(key: str, env: dict[str, str], profile: WarmProfile) -> None:
    """Start the interpreter for `key` in the background, if none runs (it ends itself if one does). Where its
    folder cannot be made this user's alone (a file there, another user's), nothing starts: jobs start anew."""
    with contextlib.suppress(OSError):
        SOCKETS.mkdir(mode=0o700, exist_ok=True)
    if not _private():
        return
    with open(SOCKETS / f"{key}.log", "ab") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", MODULE, key, profile.task_module, ",".join(profile.hidden), "x" * 256],
            env={**env, SLOT_ENV: "x" * SLOT_BYTES},
            cwd=SOCKETS,  # its sys.path[0]: no launch folder's modules shadow a library's in the jobs it forks
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=log,
            start_new_session=True,
            close_fds=True,
        )
    threading.Thread(target=process.wait, daemon=True, name="nbtoolkit-warm-reap").start()


def _write_tags(values: dict[str, str]) -> bool:
    """Show `values` in this process's /proc/PID/environ, in the padding variable's room; False: they do not fit."""
    _, _, env_start, env_end = memory_regions()
    block = Path("/proc/self/environ").read_bytes()
    entry = f"{SLOT_ENV}=".encode()
    at = 0 if block.startswith(entry) else block.find(b"\0" + entry) + 1
    if at == 0 and not block.startswith(entry):
        return False
    room = block.index(b"\0", at) - at
    tags = b"".join(f"{name}={value}".encode() + b"\0" for name, value in values.items()) + entry
    if len(tags) > room or env_start + at + room > env_end:
        return False
    ctypes.memmove(env_start + at, tags.ljust(room, b"x"), room)  # the padding stays one valid variable
    return True


def _become_supervisor(connection: socket.socket, request: dict, listener: socket.socket, lock: int) -> None:
    """In the forked supervisor: the job's session, environment, tag, command line, folder and log, then the
    supervisor's own main; leaves by os._exit with its code."""
    code = 1
    try:
        listener.close()
        os.close(lock)
        os.setsid()
        job_id, env = request["job"], request["env"]
        os.environ.clear()
        os.environ.update({**_set_by_imports, **env})  # what the imports set, as a new interpreter's would
        if not _write_tags({JOB_ID_ENV: job_id, HOME_ENV: env[HOME_ENV]}):
            raise RuntimeError("the job's tag does not fit the room the warm interpreter reserved")
        write_command_line([sys.executable, "-m", "nbtoolkit.runner.supervisor", job_id])
        os.chdir(request["dir"])
        sys.path[0] = request["dir"]  # as `python -m nbtoolkit.runner.supervisor` started there has it
        sys.stderr.flush()
        with open(Path(request["dir"]) / "supervisor.log", "ab") as log:
            os.dup2(log.fileno(), 2)
        os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
        connection.close()
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        from nbtoolkit.runner import supervisor

        code = supervisor.main([job_id], fork_stages=True)
    except BaseException:
        traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stderr.flush()
        os._exit(code)


#: what every run of the program imports (the Trainer's module pulls in most of transformers), and the supervisor
WARM_MODULES = ("transformers.trainer", "nbtoolkit.runner.supervisor", "nbtoolkit.tasks", "nbtoolkit.train.task_setup")
#: what the warm-up's imports set in the environment, and the files it loaded (with their modification times)
_set_by_imports: dict[str, str] = {}
_imported: dict[str, int] = {}


def _warm_up(profile: WarmProfile) -> bool:
    """Import what nbtoolkit's program imports for the profile's task; False when forking would not be safe."""
    import importlib

    before = dict(os.environ)
    from nbtoolkit.train import program

    program.hide_unused_integrations(profile.hidden)
    import torch

    for module in (*WARM_MODULES, profile.task_module):
        importlib.import_module(module)
    program.quiet_libraries()  # imports datasets too
    _set_by_imports.update({name: value for name, value in os.environ.items() if name not in before})
    _imported.update(_module_files())
    # native threads (torch's, pyarrow's allocator) are there in every process that imported them, and torch's
    # DataLoader forks such processes for its workers on Linux; a Python thread or CUDA is not forked safely
    return not torch.cuda.is_initialized() and threading.active_count() == 1 and _forks_use_cuda()


def _forks_use_cuda() -> bool:
    """A child forked now can start CUDA (an import that asked `torch.cuda.is_available()` makes every fork's first
    CUDA call fail: "Cannot re-initialize CUDA in forked subprocess"): asked of a child."""
    pid = os.fork()
    if pid == 0:
        import torch

        os._exit(1 if torch.cuda._is_in_bad_fork() else 0)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0


def _module_files() -> dict[str, int]:
    """The source file of every module loaded, with its modification time."""
    found = {}
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if isinstance(path, str):
            with contextlib.suppress(OSError):
                found[path] = os.stat(path).st_mtime_ns
    return found


def _stale() -> bool:
    """A module loaded here has changed on disk or gone since (an edit, a pip install, a plugin's new version)."""
    for path, mtime in _imported.items():
        try:
            if os.stat(path).st_mtime_ns != mtime:
                return True
        except OSError:
            return True
    return False


def serve(key: str, profile: WarmProfile) -> int:
    """Fork a supervisor for each job asked for, until IDLE_S pass without one, a `stop_all` asks it to end, or
    more than MOST interpreters listen and it is the one used longest ago."""
    lock = os.open(SOCKETS / f"{key}.lock", os.O_CREAT | os.O_RDWR, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return 0  # one serves this key already
    if not _warm_up(profile):
        print(
            f"[nbtoolkit] warm interpreter {key}: its imports started CUDA or a thread: it serves no job",
            file=sys.stderr,
        )
        return 0
    gc.freeze()  # what is imported now is shared with every fork, untouched by their collections
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # through `finally`: no socket left behind
    path, staging = SOCKETS / f"{key}.sock", SOCKETS / f"{key}.{os.getpid()}.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(staging))
    listener.listen(8)
    os.replace(staging, path)
    mine = path.stat().st_ino
    try:
        idle = float(os.environ.get(IDLE_ENV, IDLE_S))
    except ValueError:  # not a number of seconds: the default
        idle = IDLE_S
    listener.settimeout(1.0)
    last = time.monotonic()
    try:
        while time.monotonic() - last < idle and not _evicted(path):
            with contextlib.suppress(ChildProcessError):
                while os.waitpid(-1, os.WNOHANG)[0]:
                    pass
            try:
                connection, _ = listener.accept()
            except TimeoutError:
                continue
            with connection:
                connection.settimeout(ANSWER_S)
                try:
                    request = json.loads(connection.makefile("rb").readline())
                except (OSError, ValueError):
                    continue
                if request.get("stop") or _stale():
                    break  # a stale one answers nothing: the job starts anew, and starts a new interpreter
                pid = os.fork()
                if pid == 0:
                    _become_supervisor(connection, request, listener, lock)
                with contextlib.suppress(OSError):
                    connection.sendall(json.dumps({"pid": pid, "started": _start_time(pid)}).encode() + b"\n")
            os.utime(path)  # its last use, for _evicted
            last = time.monotonic()
    finally:
        with contextlib.suppress(FileNotFoundError):
            if path.stat().st_ino == mine:  # not one a later interpreter of this key put there
                path.unlink()
        _remove_own_files(key)
    return 0


def _remove_own_files(key: str) -> None:
    """An interpreter that ends leaves nothing behind (keys vary with the environment, and each left a lock and a log
    in the folder): its lock, removed while it still holds it, and its log unless something was written there."""
    (SOCKETS / f"{key}.lock").unlink(missing_ok=True)
    log = SOCKETS / f"{key}.log"
    with contextlib.suppress(OSError):
        if log.stat().st_size == 0:
            log.unlink()


def _evicted(path: Path) -> bool:
    """More than MOST interpreters listen and this one was used longest ago (each holds ~440 MB). A socket whose
    interpreter is gone (killed: its lock is free) is removed, not counted."""
    listening = [other for other in SOCKETS.glob("*.sock") if other == path or _alive(other)]
    with contextlib.suppress(OSError):
        return len(listening) > MOST and min(listening, key=lambda other: other.stat().st_mtime) == path
    return False


def _alive(path: Path) -> bool:
    """Its interpreter holds its key's lock; a socket left by a killed one is removed."""
    try:
        lock = os.open(path.with_suffix(".lock"), os.O_RDWR)
    except OSError:
        return False  # a staging socket, or its lock removed by hand
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(lock)
    path.unlink(missing_ok=True)
    return False


def stop_all() -> None:
    """Ask every warm interpreter of this user to end (the test suite's end); the jobs they forked go on."""
    for path in SOCKETS.glob("*.sock") if _private() else ():
        with contextlib.suppress(OSError), _connect(path) as client:
            client.sendall(b'{"stop": true}\n')


def _connect(path: Path) -> socket.socket:
    """A connection to the interpreter listening at `path`; a socket no one listens at (its interpreter was killed)
    is removed."""
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    client.settimeout(ANSWER_S)
    try:
        client.connect(str(path))
    except ConnectionRefusedError:
        client.close()
        path.unlink(missing_ok=True)
        raise
    except OSError:
        client.close()
        raise
    return client


def _private() -> bool:
    """The sockets' folder is this user's alone: a job's environment (its secrets) goes to no one else's socket."""
    with contextlib.suppress(FileNotFoundError):
        found = SOCKETS.lstat()
        return stat.S_ISDIR(found.st_mode) and found.st_uid == os.getuid() and not found.st_mode & 0o077
    return False


def _start_time(pid: int) -> float | None:
    import psutil

    with contextlib.suppress(psutil.Error):
        return psutil.Process(pid).create_time()
    return None


if __name__ == "__main__":
    hidden = tuple(name for name in sys.argv[3].split(",") if name)
    sys.exit(serve(sys.argv[1], WarmProfile(hidden, sys.argv[2])))
