"""REST handlers: HTTP in, JobsService call, JSON out. Every verb requires an authenticated user."""

from __future__ import annotations

import asyncio

from jupyter_server.base.handlers import APIHandler
from pydantic import BaseModel
from tornado import web

from nbtoolkit.jobs.store import JobNotFound
from nbtoolkit.server.service import LIST_LIMIT_DEFAULT, LOG_LIMIT_DEFAULT, InvalidRequest, JobsService


class JobsAPIHandler(APIHandler):
    """Shared plumbing: the service, integer query arguments, and API errors as JSON 4xx replies."""

    @property
    def service(self) -> JobsService:
        return self.settings["nbtoolkit_jobs"]

    def int_argument(self, name: str, default: int) -> int:
        value = self.get_argument(name, None)
        if value is None:
            return default
        try:
            return int(value)
        except ValueError:
            raise web.HTTPError(400, f"{name} '{value[:40]}' is not a whole number") from None

    def reply(self, body: BaseModel) -> None:
        self.set_header("Content-Type", "application/json")
        self.finish(body.model_dump_json())

    def write_error(self, status_code: int, **kwargs) -> None:
        status = _api_error_status(kwargs.get("exc_info", (None, None, None))[1])
        if status is None:
            return super().write_error(status_code, **kwargs)
        self.set_status(status)
        self.finish({"message": str(kwargs["exc_info"][1])})

    def log_exception(self, typ, value, tb) -> None:
        if _api_error_status(value) is None:  # a request the API refuses is no server fault
            super().log_exception(typ, value, tb)


def _api_error_status(error: BaseException | None) -> int | None:
    return 400 if isinstance(error, InvalidRequest) else 404 if isinstance(error, JobNotFound) else None


class JobListHandler(JobsAPIHandler):
    @web.authenticated
    def get(self) -> None:
        statuses = [status for value in self.get_arguments("status") for status in value.split(",") if status]
        self.reply(self.service.list(statuses, limit=self.int_argument("limit", LIST_LIMIT_DEFAULT),
                                     offset=self.int_argument("offset", 0)))


class JobHandler(JobsAPIHandler):
    @web.authenticated
    def get(self, job_id: str) -> None:
        self.reply(self.service.get(job_id))


class JobMetricsHandler(JobsAPIHandler):
    @web.authenticated
    def get(self, job_id: str) -> None:
        self.reply(self.service.metrics(job_id, since=self.int_argument("since", 0)))


class JobLogHandler(JobsAPIHandler):
    @web.authenticated
    def get(self, job_id: str) -> None:
        self.reply(self.service.log(job_id, offset=self.int_argument("offset", 0),
                                    limit=self.int_argument("limit", LOG_LIMIT_DEFAULT)))


class JobStopHandler(JobsAPIHandler):
    @web.authenticated
    async def post(self, job_id: str) -> None:
        # stopping waits for the job's processes to end: off the event loop
        self.reply(await asyncio.get_running_loop().run_in_executor(None, self.service.stop, job_id))
