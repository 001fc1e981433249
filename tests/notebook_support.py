"""Notebook test helpers: an IPython shell with nbtoolkit loaded, and skip markers for features
that other modules bring (live charts, comparisons)."""

from __future__ import annotations

import importlib.util

import pytest


def _missing(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is None
    except ModuleNotFoundError:
        return True


needs_charts = pytest.mark.skipif(_missing("nbtoolkit.notebook.charts"),
                                  reason="a job's display is its live chart, from nbtoolkit/notebook/charts.py "
                                         "(issue 5), not on this branch")
needs_compare = pytest.mark.skipif(_missing("nbtoolkit.metrics.compare"),
                                   reason="%finetune_compare shows nbtoolkit/metrics/compare.py (issue 5), "
                                          "not on this branch")


@pytest.fixture
def shell(home):
    """A real IPython shell with `%load_ext nbtoolkit` done, its jobs in a fresh store."""
    from IPython.core.interactiveshell import InteractiveShell

    ip = InteractiveShell.instance()
    ip.extension_manager.load_extension("nbtoolkit")
    return ip
