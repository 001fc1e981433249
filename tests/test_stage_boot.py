"""The stage boot (nbtoolkit/runner/stage_boot): every process of a local stage exits without the final garbage
collections that took seconds per torch-importing process, yet runs every exit handler, still runs the site's own
sitecustomize, and reaches a user's script through its autolog boot."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from nbtoolkit.backends.program import AUTOLOG_BOOT
from nbtoolkit.runner.stage_boot import STAGE_BOOT, with_stage_boot

#: a program that leaves a reference cycle with a finalizer for the exit to collect, and an exit handler of its own
PROGRAM = """
import atexit, os, sys
out = sys.argv[1]
class Node:
    def __del__(self, open=open, path=os.path.join(out, "collected")):  # the module's names are gone by then
        open(path, "w").close()
node = Node()
node.self = node
atexit.register(lambda: open(os.path.join(out, "exit handler ran"), "w").close())
print(os.environ.get("SITE_SETUP"), "transformers" in sys.modules)
"""


@pytest.fixture
def site(tmp_path):
    """A site's own sitecustomize, which a boot folder first on the path hides from Python's own lookup."""
    folder = tmp_path / "site"
    folder.mkdir()
    (folder / "sitecustomize.py").write_text("import os\nos.environ['SITE_SETUP'] = 'ran'\n")
    return folder


@pytest.mark.parametrize("boot", [None, STAGE_BOOT, AUTOLOG_BOOT], ids=["no boot", "stage boot", "autolog boot"])
def test_a_boot_skips_the_exits_collections_and_keeps_exit_handlers_and_the_sites_sitecustomize(tmp_path, site, boot):
    out = tmp_path / "out"
    out.mkdir()
    path = [str(boot)] if boot else []
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([*path, str(site)]), "NBTOOLKIT_JOB_DIR": str(tmp_path)}
    env.pop("SITE_SETUP", None)
    result = subprocess.run(
        [sys.executable, "-c", PROGRAM, str(out)], capture_output=True, text=True, env=env, check=True
    )
    assert result.stdout.split() == ["ran", "False"] and result.stderr == ""
    assert (out / "exit handler ran").exists()
    # without a boot the exit collects the cycle (and runs its finalizer); under one it leaves it to the OS
    assert (out / "collected").exists() == (boot is None)


def test_the_stage_boot_goes_first_once_and_leaves_a_scripts_autolog_boot_first():
    user = os.pathsep.join(["/opt/site", "/home/me/lib"])
    assert with_stage_boot(None) == str(STAGE_BOOT)
    assert with_stage_boot(user) == os.pathsep.join([str(STAGE_BOOT), user])
    assert with_stage_boot(with_stage_boot(user)) == with_stage_boot(user)
    script = os.pathsep.join([str(AUTOLOG_BOOT), user])  # the autolog boot runs the stage boot itself
    assert with_stage_boot(script) == script
