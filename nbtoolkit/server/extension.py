"""The server extension's routes under {base_url}/nbtoolkit/api, over the job store of $NBTOOLKIT_HOME."""

from __future__ import annotations

from jupyter_server.utils import url_path_join

from nbtoolkit.server import handlers
from nbtoolkit.server.service import JobsService

API_PREFIX = "nbtoolkit/api"
#: anything but a slash; the service refuses what is not a job id (400) before any path is built
JOB = r"(?P<job_id>[^/]+)"

ROUTES = [
    ("jobs", handlers.JobListHandler),
    (f"jobs/{JOB}", handlers.JobHandler),
    (f"jobs/{JOB}/metrics", handlers.JobMetricsHandler),
    (f"jobs/{JOB}/log", handlers.JobLogHandler),
    (f"jobs/{JOB}/stop", handlers.JobStopHandler),
]


def setup_routes(web_app, service: JobsService | None = None) -> None:
    """Add the API's handlers to a Jupyter server's tornado application."""
    web_app.settings["nbtoolkit_jobs"] = service or JobsService()
    base_url = web_app.settings["base_url"]
    web_app.add_handlers(".*$", [(url_path_join(base_url, API_PREFIX, path) + "/?$", handler)
                                 for path, handler in ROUTES])
