"""The Slurm tests' cluster: one per test session, started on first use and ended (every daemon) at its end."""

from __future__ import annotations

import os

import pytest

from tests.slurm.cluster import Cluster, missing_programs


@pytest.fixture(scope="session")
def slurm_cluster(tmp_path_factory):
    """A running one-node cluster; its SLURM_CONF is in this process's environment, so jobs' followers use it."""
    missing = missing_programs()
    if missing:
        pytest.fail(missing)
    cluster = Cluster(tmp_path_factory.mktemp("slurm"))
    cluster.start()
    before = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = str(cluster.conf)
    try:
        yield cluster
    finally:
        cluster.stop()
        if before is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = before
