"""`nbtoolkit.launch` / `nbtoolkit.jobs()` from the top package, and a light `%load_ext nbtoolkit`."""

from __future__ import annotations

import json
import subprocess

import nbtoolkit
from nbtoolkit.api import Job
from tests.conftest import PYTHON, SCRIPTS
from tests.test_imports import HEAVY


def run_python(code: str) -> dict:
    result = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_launch_and_jobs_from_the_top_package(store):
    job = nbtoolkit.launch({"task": "text-classification", "script": {"path": str(SCRIPTS / "sleepy.py")}})
    try:
        listed = nbtoolkit.jobs()
        assert [item.id for item in listed] == [job.id] and isinstance(listed[0], Job)
        found = nbtoolkit.job(job.id[:5])  # by a unique prefix, as `nbtoolkit jobs` shows it
        assert (
            isinstance(found, Job) and found.id == job.id and found.name == job.name == "text-classification-tiny-bert"
        )
        assert nbtoolkit.runner.JobStore is type(store)  # the package is still the package
        assert nbtoolkit.Job is Job
    finally:
        job.stop()
    assert [item.status for item in nbtoolkit.jobs()] == ["stopped"]


def test_the_top_package_names_load_lazily_and_light():
    found = run_python(
        "import json, sys, nbtoolkit\n"
        "before = 'nbtoolkit.api' in sys.modules\n"
        "from nbtoolkit.runner import JobStore\n"  # the jobs package imported first: still callable
        "listed = nbtoolkit.jobs(limit=1)\n"
        "print(json.dumps({'api_before': before, 'callable': isinstance(listed, list), "
        f"'launch': callable(nbtoolkit.launch), 'preview': nbtoolkit.preview_data.__module__, "
        f"'heavy': sorted(set(sys.modules) & set({HEAVY!r}))}}))"
    )
    assert found == {
        "api_before": False,
        "callable": True,
        "launch": True,
        "preview": "nbtoolkit.inputs.data_preview",  # what the example notebooks call, by its public name
        "heavy": [],
    }


def test_load_ext_and_the_form_import_nothing_heavy():
    found = run_python(
        "import json, sys\n"
        "from IPython.core.interactiveshell import InteractiveShell\n"
        "shell = InteractiveShell.instance()\n"
        "shell.run_line_magic('load_ext', 'nbtoolkit')\n"
        "form = shell.run_line_magic('finetune', '--form --task causal-lm --steps 3')\n"
        "preview = shell.run_line_magic('finetune', '--dry-run --task causal-lm --steps 3')\n"
        "print(json.dumps({'magics': sorted(m for m in shell.magics_manager.magics['line'] "
        "if 'finetune' in m or m in ('jobs', 'job')), 'valid': form.spec == preview.spec, "
        f"'heavy': sorted({{name.split('.')[0] for name in sys.modules}} & set({HEAVY!r}))}}))"
    )
    assert found == {
        "magics": ["finetune", "finetune_compare", "finetune_stop", "job", "jobs"],
        "valid": True,
        "heavy": [],
    }
