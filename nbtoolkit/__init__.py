"""nbtoolkit: describe, check, launch and watch Hugging Face fine-tuning runs from a notebook.

This module stays light: importing it (or `%load_ext nbtoolkit`) loads no torch,
transformers, deepspeed or sagemaker. Heavy imports happen inside the training process.
"""

from __future__ import annotations

from nbtoolkit import views

__version__ = "0.1.0"


def load_ipython_extension(ipython) -> None:
    """`%load_ext nbtoolkit`: register the magics (light: no torch)."""
    from nbtoolkit.notebook.magics import register

    register(ipython)


def chart(jobs, **options):
    """The live chart of a job or a list of jobs (handles or ids), drawn by the browser in JupyterLab;
    `live="kernel"` draws it in the kernel instead (see nbtoolkit.notebook.browser_chart for the options)."""
    from nbtoolkit.notebook.browser_chart import chart as browser_chart

    return browser_chart(jobs, **options)


def _try_it(job, checkpoint, server_url=None):
    from nbtoolkit.notebook.try_it import TryIt

    return TryIt(job, checkpoint, server_url)


def _show_job(job) -> None:
    from nbtoolkit.notebook.job_view import show_job

    show_job(job)


def _data_html(preview) -> str:
    from nbtoolkit.notebook.data_view import data_html

    return data_html(preview)


# the notebook views the core asks for by name (it never imports a view); each imports its module on first use
for _name, _view in {"chart": chart, "try_it": _try_it, "job": _show_job, "data_preview": _data_html}.items():
    views.provide(_name, _view)


def _jupyter_labextension_paths() -> list[dict[str, str]]:
    """Where the built job panel is (`jupyter labextension develop .` links it into Lab)."""
    return [{"src": "labextension", "dest": "nbtoolkit"}]


def __getattr__(name: str):
    """`nbtoolkit.launch(spec)`, `nbtoolkit.plan(spec)` (at the pace of past jobs of its setup), `nbtoolkit.job(ID)`,
    `nbtoolkit.jobs()`, `nbtoolkit.Job`, `nbtoolkit.log(step=..., loss=...)` (a custom loop's metrics) and
    `nbtoolkit.preview_data(spec)` (the data as the run will read it), imported on first use so `import nbtoolkit`
    stays light."""
    if name in ("launch", "plan", "Job", "job", "jobs"):
        from nbtoolkit import api

        return getattr(api, name)
    if name == "log":
        from nbtoolkit.ranks.report import log

        return log
    if name == "preview_data":
        from nbtoolkit.inputs.data_preview import preview_data

        return preview_data
    raise AttributeError(f"module 'nbtoolkit' has no attribute {name!r}")
