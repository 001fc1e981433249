"""REST handlers: HTTP in, JobsService call (in a thread), JSON out. Every verb is authenticated and authorized."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable

from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import APIHandler
from pydantic import BaseModel
from tornado import web

from nbtoolkit.runner.store import JobNotFound
from nbtoolkit.server.models import ErrorMessage
from nbtoolkit.server.run_doctor import DoctorService
from nbtoolkit.server.service import LIST_LIMIT_DEFAULT, LOG_LIMIT_DEFAULT, InvalidRequest, JobsService

#: what a jupyter_server Authorizer is asked about for every nbtoolkit API call
AUTH_RESOURCE = "nbtoolkit"
#: the largest integer argument (offsets, counts): what the panel's JavaScript numbers hold exactly; a larger one
#: overflowed SQLite and seek() (a 500)
MAX_INTEGER = 2**53 - 1
WHOLE_NUMBER = re.compile(r"-?[0-9]+")


class JobsAPIHandler(APIHandler):
    """Shared plumbing: the service, integer query arguments, and API errors as JSON 4xx replies.

    Every verb is authenticated, then authorized by the server's Authorizer on resource `nbtoolkit`
    (GET asks to `read`, POST stop to `write`), so a deployment's read-only users cannot stop jobs.
    """

    auth_resource = AUTH_RESOURCE

    @property
    def service(self) -> JobsService:
        return self.settings["nbtoolkit_jobs"]

    def int_argument(self, name: str, default: int) -> int:
        value = self.get_argument(name, None)
        if value is None:
            return default
        # ASCII digits only (int() also takes `１`, `٣`, `1_0`); refused as InvalidRequest, as every other 400 is
        if not WHOLE_NUMBER.fullmatch(value):
            raise InvalidRequest(f"{name} '{value[:40]}' is not a whole number")
        number = int(value)
        if abs(number) > MAX_INTEGER:
            raise InvalidRequest(f"{name} '{value[:40]}' is too large; use a whole number up to {MAX_INTEGER}")
        return number

    async def reply_from(self, call: Callable[..., BaseModel], *args, **kwargs) -> None:
        """Reply with what `call` returns, run off the event loop (SQLite, files and process scans block)."""
        body = await asyncio.to_thread(call, *args, **kwargs)
        self.set_header("Content-Type", "application/json")
        self.finish(body.model_dump_json())

    def write_error(self, status_code: int, **kwargs) -> None:
        status = _api_error_status(kwargs.get("exc_info", (None, None, None))[1])
        if status is None:
            return super().write_error(status_code, **kwargs)
        self.set_status(status)
        self.set_header("Content-Type", "application/json")
        self.finish(ErrorMessage(message=str(kwargs["exc_info"][1])).model_dump_json())

    def log_exception(self, typ, value, tb) -> None:
        if _api_error_status(value) is None:  # a request the API refuses is no server fault
            super().log_exception(typ, value, tb)


def _api_error_status(error: BaseException | None) -> int | None:
    return 400 if isinstance(error, InvalidRequest) else 404 if isinstance(error, JobNotFound) else None


class JobListHandler(JobsAPIHandler):
    @web.authenticated
    @authorized
    async def get(self) -> None:
        statuses = [status for value in self.get_arguments("status") for status in value.split(",") if status]
        await self.reply_from(
            self.service.list,
            statuses,
            limit=self.int_argument("limit", LIST_LIMIT_DEFAULT),
            offset=self.int_argument("offset", 0),
        )


class JobHandler(JobsAPIHandler):
    @web.authenticated
    @authorized
    async def get(self, job_id: str) -> None:
        """The job, with an ETag; 304 and no body when If-None-Match holds it (nothing changed since)."""
        known = self.request.headers.get("If-None-Match")
        detail, etag = await asyncio.to_thread(self.service.get_if_changed, job_id, known)
        self.set_header("ETag", etag)
        if detail is None:
            self.set_status(304)
            self.finish()
            return
        self.set_header("Content-Type", "application/json")
        self.finish(detail.model_dump_json())


class JobMetricsHandler(JobsAPIHandler):
    @web.authenticated
    @authorized
    async def get(self, job_id: str) -> None:
        await self.reply_from(
            self.service.metrics, job_id, since=self.int_argument("since", 0), points=self.int_argument("points", 0)
        )


class JobLogHandler(JobsAPIHandler):
    @web.authenticated
    @authorized
    async def get(self, job_id: str) -> None:
        await self.reply_from(
            self.service.log,
            job_id,
            offset=self.int_argument("offset", 0),
            limit=self.int_argument("limit", LOG_LIMIT_DEFAULT),
            view=self.get_argument("view", "raw"),
        )


class JobStopHandler(JobsAPIHandler):
    @web.authenticated
    @authorized
    async def post(self, job_id: str) -> None:
        await self.reply_from(self.service.stop, job_id)  # waits for the job's processes to end


class RunDoctorHandler(JobsAPIHandler):
    """The run doctor's calls (health, stacks, checkpoint now, fork) over the same store as the service."""

    @property
    def doctor(self) -> DoctorService:
        return DoctorService(self.service.store)


class JobHealthHandler(RunDoctorHandler):
    @web.authenticated
    @authorized
    async def get(self, job_id: str) -> None:
        await self.reply_from(self.doctor.health, job_id)


class JobStacksHandler(RunDoctorHandler):
    @web.authenticated
    @authorized
    async def post(self, job_id: str) -> None:
        await self.reply_from(self.doctor.stacks, job_id)


class JobCheckpointHandler(RunDoctorHandler):
    @web.authenticated
    @authorized
    async def post(self, job_id: str) -> None:
        await self.reply_from(self.doctor.checkpoint, job_id)


class JobForkHandler(RunDoctorHandler):
    @web.authenticated
    @authorized
    async def post(self, job_id: str) -> None:
        await self.reply_from(
            self.doctor.fork, job_id, self.get_argument("checkpoint", None), self.get_arguments("set")
        )
