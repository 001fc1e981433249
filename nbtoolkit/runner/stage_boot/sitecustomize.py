"""First on PYTHONPATH in every process of nbtoolkit's own program on this machine (ranks, torchrun, DeepSpeed's
launchers, the kernel's model helpers): the interpreter skips its final garbage collections when it exits, then
the site's own `sitecustomize` runs as it would have.

As it exits, CPython collects all that is left: in a process that imported torch, some 320,000 objects, which
took 1.4-9 s per process on the project's 2-core machine, paid by each rank and then by each launcher above it
before the job could end. Frozen objects are skipped. Registered first, this exit handler runs last (they run
in reverse), after every other one (logging's flush, trackers' finish); objects freed by their reference counts
are freed as before. What only that last collection would finish (a file object left in a reference cycle,
flushed by its finalizer) is not: so a user's script never gets this boot.
Standard library only: it runs in any interpreter a stage starts, nbtoolkit importable there or not.
"""

import atexit
import gc
import importlib.machinery
import importlib.util
import os
import sys
import traceback
import types

#: set once per process: a site's sitecustomize that chains "the next one" itself comes back here
MARKER = "_nbtoolkit_stage_boot"


def _run_site_sitecustomize() -> None:
    """The `sitecustomize` Python would have imported without nbtoolkit's boot folders first on the path, run
    as Python runs it: registered as `sitecustomize` (its relative imports and later imports of it work)."""
    package = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__)))) + os.sep
    others = [entry for entry in sys.path if not os.path.realpath(entry or os.curdir).startswith(package)]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", others)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules["sitecustomize"]
        if sys.flags.verbose:
            traceback.print_exc()
        print(
            f"Error in sitecustomize ({spec.origin}); set PYTHONVERBOSE for a traceback:\n{type(exc).__name__}: {exc}",
            file=sys.stderr,
        )


if MARKER not in sys.modules:
    sys.modules[MARKER] = types.ModuleType(MARKER)
    if __name__ == "sitecustomize":  # not when a script's autolog boot runs this file for its chaining alone
        atexit.register(gc.freeze)
    _run_site_sitecustomize()
