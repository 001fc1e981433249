"""First on PYTHONPATH in a user's script job: what the stage boot does (nbtoolkit/runner/stage_boot: a quick
exit, then the site's own sitecustomize, which this one would otherwise hide), then install autolog.
"""

import os
import runpy
import sys

try:  # first: a rank must not outlive the processes supervising it
    from nbtoolkit.runtime import die_with_parent

    die_with_parent()
except ModuleNotFoundError:
    pass
# the stage boot: an exit without the final garbage collections, then the site's own sitecustomize
runpy.run_path(
    os.path.join(
        os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
        "runner",
        "stage_boot",
        "sitecustomize.py",
    ),
    run_name="nbtoolkit_stage_boot",
)
try:
    from nbtoolkit.train.autolog import install

    install()
except Exception as exc:  # an interpreter without nbtoolkit (a tool's own Python, a build step) has nothing to patch
    if not (isinstance(exc, ModuleNotFoundError) and exc.name == "nbtoolkit"):
        print(f"[nbtoolkit] metrics autolog is off for this script ({type(exc).__name__}: {exc})", file=sys.stderr)
