"""Jupyter server extension: the REST API over the job store that the JupyterLab job panel reads.

Enabled on install by jupyter-config/server-config/nbtoolkit.json; the contract is openapi.yaml.
"""

from __future__ import annotations


def _jupyter_server_extension_points() -> list[dict[str, str]]:
    return [{"module": "nbtoolkit.server"}]


def _load_jupyter_server_extension(server_app) -> None:
    from nbtoolkit.server.extension import setup_routes

    setup_routes(server_app.web_app)
    server_app.log.info("nbtoolkit: job API at %snbtoolkit/api/jobs", server_app.web_app.settings["base_url"])
