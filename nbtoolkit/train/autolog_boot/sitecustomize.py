"""First on PYTHONPATH in a user's script job: run the next sitecustomize (if any), then install autolog.

Python imports one `sitecustomize`; this one hands on to the one it hides, so a site's own setup still runs.
"""

import importlib.machinery
import importlib.util
import os
import sys


def _run_hidden_sitecustomize() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    others = [entry for entry in sys.path if os.path.abspath(entry or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", others)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        print(
            f"Error in sitecustomize ({spec.origin}); set PYTHONVERBOSE for a traceback:\n{type(exc).__name__}: {exc}",
            file=sys.stderr,
        )


try:  # first: a rank must not outlive the processes supervising it
    from nbtoolkit.runtime import die_with_parent

    die_with_parent()
except ModuleNotFoundError:
    pass
_run_hidden_sitecustomize()
try:
    from nbtoolkit.train.autolog import install

    install()
except Exception as exc:  # an interpreter without nbtoolkit (a tool's own Python, a build step) has nothing to patch
    if not (isinstance(exc, ModuleNotFoundError) and exc.name == "nbtoolkit"):
        print(f"[nbtoolkit] metrics autolog is off for this script ({type(exc).__name__}: {exc})", file=sys.stderr)
