"""A stage forked from its supervisor instead of started as a new interpreter, when the supervisor was itself
forked from a warm interpreter (warm_interpreter.py) that imported what nbtoolkit's program imports: the stage
gets what `subprocess.Popen(start_new_session=True, preexec_fn=die_with_parent)` and a new interpreter would give
it, and shows the program's command line in /proc/PID/cmdline, as a stage started anew does."""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import runpy
import signal
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path

#: the stage a warm supervisor forks: nbtoolkit's own training program
PROGRAM = "nbtoolkit.train"


class ForkedStage:
    """A stage forked from the supervisor, with what the supervisor asks of a `subprocess.Popen`."""

    def __init__(self, pid: int, stdout) -> None:
        self.pid, self.stdout = pid, stdout
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:  # reaped by psutil as a stop ended it: the supervisor sets its status
                self.returncode = 0
                return self.returncode
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while (code := self.poll()) is None:
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(str(self.pid), timeout or 0)
            time.sleep(0.02)
        return code


def fork_stage(argv: list[str], cwd: str | Path, env: dict[str, str]) -> ForkedStage | None:
    """The stage forked from this supervisor when it runs nbtoolkit's program here; None: start it anew. Only a
    supervisor forked from a warm interpreter asks (one started anew has imported none of the program's libraries)."""
    if argv[:3] != [sys.executable, "-m", PROGRAM] or threading.active_count() != 1:
        return None
    read_end, write_end = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        _run_stage(argv, cwd, env, write_end)  # never returns
    os.close(write_end)
    return ForkedStage(pid, open(read_end, "rb", buffering=0))


def _run_stage(argv: list[str], cwd: str | Path, env: dict[str, str], output: int) -> None:
    """In the forked stage: what Popen(start_new_session, preexec_fn=die_with_parent) and a new interpreter would
    give it, then the program as `python -m nbtoolkit.train` runs it; it leaves by os._exit (the supervisor's
    objects, copied into it, are not its to finalize)."""
    code = 1
    try:
        from nbtoolkit.launching.runtime import die_with_parent

        os.setsid()
        die_with_parent()
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        os.dup2(output, 1)
        os.dup2(output, 2)
        os.closerange(3, os.sysconf("SC_OPEN_MAX") if hasattr(os, "sysconf") else 1024)
        for signum in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        os.chdir(cwd)
        sys.path[0] = os.getcwd()  # as `python -m nbtoolkit.train` started there has it
        _reseed()
        os.environ.clear()
        os.environ.update(env)
        write_command_line(argv)
        atexit._clear()  # the supervisor's exit handlers are not the stage's
        sys.argv = ["-m", *argv[3:]]
        code = _run_module(PROGRAM)
        for thread in threading.enumerate():  # what interpreter shutdown would wait for
            if thread is not threading.main_thread() and not thread.daemon:
                thread.join()
        atexit._run_exitfuncs()
    except BaseException:
        traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _reseed() -> None:
    """Fresh random states, as a new interpreter starts with (each fork would repeat its parent's): what the program
    does before it seeds them from the spec differs from job to job, as it did."""
    for name, reseed in (("torch", "seed"), ("numpy.random", "seed")):
        module = sys.modules.get(name)
        if module is not None:
            getattr(module, reseed)()


def _run_module(module: str) -> int:
    """`python -m module`'s exit code, as the interpreter turns SystemExit into one."""
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit as exit_:
        if exit_.code is None or isinstance(exit_.code, int):
            return exit_.code or 0
        print(exit_.code, file=sys.stderr)
        return 1
    return 0


def memory_regions() -> tuple[int, int, int, int]:
    """Where this process's original command line and environment lie (/proc/PID/stat fields 48-51)."""
    stat = Path("/proc/self/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()  # after the command's name, which may hold spaces
    arg_start, arg_end, env_start, env_end = (int(fields[number - 3]) for number in (48, 49, 50, 51))
    return arg_start, arg_end, env_start, env_end


def write_command_line(argv: list[str]) -> None:
    """Show `argv` as this process's /proc/PID/cmdline, in the room the interpreter's own command line takes."""
    arg_start, arg_end, _, _ = memory_regions()
    room = arg_end - arg_start - 1  # the last byte stays the terminating NUL
    text = b"\0".join(os.fsencode(item) for item in argv)[:room]
    ctypes.memmove(arg_start, text.ljust(room, b"\0"), room)
