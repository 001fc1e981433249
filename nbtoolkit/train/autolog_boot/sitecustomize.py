"""First on PYTHONPATH in a user's script job: run the next sitecustomize (if any), then install autolog.

Python imports one `sitecustomize`; this one hands on to the one it hides (through the stage boot's chaining,
nbtoolkit/runner/stage_boot), so a site's own setup still runs.
"""

import os
import runpy
import sys

try:  # first: a rank must not outlive the processes supervising it
    from nbtoolkit.launching.runtime import die_with_parent

    die_with_parent()
except ModuleNotFoundError:
    pass
# the site's own sitecustomize, as the stage boot runs it (once, registered as sitecustomize); a script's exit
# stays Python's own: the stage boot skips the final collections only when Python imports it as sitecustomize
runpy.run_path(
    os.path.join(
        os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
        "runner",
        "stage_boot",
        "sitecustomize.py",
    ),
    run_name="nbtoolkit_autolog_boot_chain",
)
try:
    from nbtoolkit.train.autolog import install

    install()
except Exception as exc:  # an interpreter without nbtoolkit (a tool's own Python, a build step) has nothing to patch
    if not (isinstance(exc, ModuleNotFoundError) and exc.name == "nbtoolkit"):
        print(f"[nbtoolkit] metrics autolog is off for this script ({type(exc).__name__}: {exc})", file=sys.stderr)
