"""The stage boot (nbtoolkit/runner/stage_boot): every process of nbtoolkit's own program on this machine exits
without the final garbage collections that took seconds per torch-importing process, yet runs every exit handler
and the site's own sitecustomize as Python would; a user's script keeps the exit Python gives it."""

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
    # the stage boot leaves the cycle to the OS; a script's (autolog) boot keeps Python's collection, whose
    # finalizers flush what a user's own objects hold
    assert (out / "collected").exists() == (boot != STAGE_BOOT)


@pytest.mark.parametrize("boot", [STAGE_BOOT, AUTOLOG_BOOT], ids=["stage boot", "autolog boot"])
def test_a_sites_sitecustomize_runs_once_as_sitecustomize_even_when_it_chains_the_next_one_itself(tmp_path, boot):
    """APM agents' bootstraps (New Relic's among them) drop their own folder from the path and import "the next"
    sitecustomize themselves: here that is the stage boot again, which must not run theirs a second time."""
    site = tmp_path / "agent"
    (site / "sitecustomize").mkdir(parents=True)
    (site / "sitecustomize" / "__init__.py").write_text(
        "import importlib.machinery, importlib.util, os, sys\n"
        "from . import setting\n"  # a package with relative imports: it must be registered as sitecustomize
        "print('agent ran', setting.VALUE)\n"
        "here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))\n"
        "path = [entry for entry in sys.path if os.path.abspath(entry) != here]\n"
        "spec = importlib.machinery.PathFinder.find_spec('sitecustomize', path)\n"
        "if spec is not None:\n"
        "    spec.loader.exec_module(importlib.util.module_from_spec(spec))\n"
    )
    (site / "sitecustomize" / "setting.py").write_text("VALUE = 42\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(boot), str(site)])}
    code = "import atexit, sitecustomize; print(sitecustomize.setting.VALUE, atexit._ncallbacks())"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    freezes = 1 if boot == STAGE_BOOT else 0  # a script's exit stays Python's own
    assert result.stdout.split("\n")[:2] == ["agent ran 42", f"42 {freezes}"] and result.stderr == ""


def test_the_stage_boot_goes_first_once_and_leaves_a_scripts_autolog_boot_first():
    user = os.pathsep.join(["/opt/site", "/home/me/lib"])
    assert with_stage_boot(None) == str(STAGE_BOOT)
    assert with_stage_boot(user) == os.pathsep.join([str(STAGE_BOOT), user])
    assert with_stage_boot(with_stage_boot(user)) == with_stage_boot(user)
    script = os.pathsep.join([str(AUTOLOG_BOOT), user])  # the autolog boot runs the stage boot itself
    assert with_stage_boot(script) == script


@pytest.mark.parametrize(
    ("spec", "booted"),
    [
        ({"task": "text-classification"}, True),
        ({"task": "text-classification", "hardware": {"devices": 2}}, True),  # torchrun
        ({"task": "text-classification", "hardware": {"devices": 2}, "parallelism": {"strategy": "deepspeed"}}, True),
        ({"task": "causal-lm", "script": "train.py"}, False),  # the user's own exit, as Python gives it
    ],
    ids=["one process", "torchrun", "deepspeed", "script"],
)
def test_nbtoolkits_own_program_on_this_machine_is_launched_with_the_stage_boot(
    spec, booted, store, monkeypatch, tmp_path
):
    from nbtoolkit import api

    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text("")

    submitted = {}

    def submit(launch, **options):
        submitted.update(options)
        raise SystemExit  # nothing starts

    monkeypatch.setattr(api.job_control, "submit", submit)
    with pytest.raises(SystemExit):
        api.launch(spec, store=store)
    assert submitted["stage_boot"] is booted
