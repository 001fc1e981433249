"""Jupyter server extension: the REST API over the job store that the JupyterLab job panel reads.

Enabled on install by jupyter-config/server-config/nbtoolkit.json; the contract is openapi.yaml, generated from the
response models and routes (openapi.py).
"""

from __future__ import annotations


def _jupyter_server_extension_points() -> list[dict[str, str]]:
    return [{"module": "nbtoolkit.server"}]


def _load_jupyter_server_extension(server_app) -> None:
    from nbtoolkit.runner.store import StoreError
    from nbtoolkit.server.extension import setup_routes

    try:
        setup_routes(server_app.web_app)
    except StoreError as exc:  # the server runs on without the job API, and says why in one line
        server_app.log.error("nbtoolkit: the job API is off: %s", exc)
        return
    server_app.log.info("nbtoolkit: job API at %snbtoolkit/api/jobs", server_app.web_app.settings["base_url"])
