"""A local stand-in for SageMaker training jobs, for offline notebooks and tests (needs `moto[server]`).

moto's server on 127.0.0.1 plus what moto lacks; `SageMakerStandIn.env` is what a process needs to
send the SageMaker SDK, boto3 and nbtoolkit's follower there instead of to AWS.

moto 5.2.5 serves S3, CreateTrainingJob, Describe/ListTrainingJobs and CloudWatch Logs. A real
service also does the following, which moto does not, so this module adds it:

- keeps each CreateTrainingJob request exactly as the SDK sent it (moto drops Environment, swaps
  the metric definitions for its own and reports OutputDataConfig without KmsKeyId);
- moves a job through SageMaker's statuses (InProgress: Starting, Downloading, Training,
  Uploading; then Completed, Failed or Stopped) instead of reporting Completed at once, and
  reports billable and training seconds (a spot job bills 30% of its training time);
- runs the job's "container": every input channel (the code, an earlier job's model) is fetched from
  S3 into /opt/ml/input/data/<channel> as File mode does, and the entry script runs with SageMaker's
  SM_* variables (SM_CHANNEL_<NAME> among them), /opt/ml mapped to a directory of its own; its
  output goes to CloudWatch Logs (/aws/sagemaker/TrainingJobs, stream NAME/algo-1-<time>);
- on success, uploads /opt/ml/model as <S3OutputPath>/<name>/output/model.tar.gz and reports it as
  ModelArtifacts (moto reports that URI from the start, and uploads nothing);
  Distributed jobs run as one process here, and requirements.txt is not installed;
- StopTrainingJob (moto answers HTTP 500): Stopping, then Stopped;
- spot interruptions: the container is ended, its /opt/ml/checkpoints synced to the job's
  checkpoint S3 URI and wiped; the job is Interrupted, then starts again with the checkpoints
  restored from S3 (or none, without a CheckpointConfig);
- IAM SimulatePrincipalPolicy (the SDK asks it before uploading code; moto answers HTTP 500).
"""

from __future__ import annotations

import json
import logging
import math
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

REGION = "us-east-1"
BUCKET = "nbtoolkit-standin"
ROLE = "arn:aws:iam::123456789012:role/nbtoolkit-sagemaker"
LOG_GROUP = "/aws/sagemaker/TrainingJobs"
SPOT_BILLED_FRACTION = 0.3
LOG = logging.getLogger(__name__)
TELEMETRY_OPT_OUT = "SchemaVersion: '1.0'\nSageMaker:\n  PythonSDK:\n    Modules:\n      TelemetryOptOut: true\n"


def utc(timestamp: float) -> datetime:
    return datetime.fromtimestamp(timestamp, tz=timezone.utc)


class Container:
    """One run of a training job's code, as SageMaker runs it on algo-1."""

    def __init__(self, standin: SageMakerStandIn, name: str, request: dict[str, Any]) -> None:
        self.standin, self.name, self.request = standin, name, request
        self.root = standin.root / name  # the container's /opt/ml
        self.process: subprocess.Popen | None = None
        self.ended = threading.Event()
        self.interrupted = False
        #: set once an interruption has synced the checkpoints: the job may start again
        self.restartable = threading.Event()

    def opt_ml(self, value: str) -> str:
        return value.replace("/opt/ml", str(self.root))

    def fetch_channels(self) -> dict[str, Path]:
        """Every input channel copied into /opt/ml/input/data/<name>, as File mode does (a URI that names one object
        leaves that object under its own name)."""
        channels = {}
        for item in self.request["InputDataConfig"]:
            channels[item["ChannelName"]] = self.root / "input" / "data" / item["ChannelName"]
            self.standin.download(item["DataSource"]["S3DataSource"]["S3Uri"], channels[item["ChannelName"]])
        return channels

    def sagemaker_variables(self, channels: dict[str, Path], hyperparameters: dict[str, str]) -> dict[str, str]:
        """The SM_* variables nbtoolkit's entry script reads, named and formatted as the sagemaker-training toolkit
        of the images sets them (its Environment.to_env_vars; tests/facts/sagemaker-training-5.1.4.json)."""
        return {
            "SM_MODEL_DIR": str(self.root / "model"),
            "SM_OUTPUT_DATA_DIR": str(self.root / "output" / "data"),
            "SM_INPUT_DIR": str(self.root / "input"),
            "SM_HPS": json.dumps(hyperparameters, sort_keys=True, separators=(",", ":")),
            "TRAINING_JOB_NAME": self.name,
            "SM_CURRENT_HOST": "algo-1",
            **{f"SM_CHANNEL_{name.upper()}": str(path) for name, path in channels.items()},
        }

    def start(self) -> None:
        channels = self.fetch_channels()
        code = channels["code"]
        for path in ("model", "output/data", "checkpoints"):
            (self.root / path).mkdir(parents=True, exist_ok=True)
        hyperparameters = self.request.get("HyperParameters", {})
        env = {
            **os.environ,
            **{key: self.opt_ml(value) for key, value in self.request.get("Environment", {}).items()},
            **self.sagemaker_variables(channels, hyperparameters),
        }
        args = [item for key, value in hyperparameters.items() for item in (f"--{key}", value)]
        self.process = subprocess.Popen(
            self.standin.dry_program or [sys.executable, self.standin.entry_script(self.request), *args],
            cwd=code,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            bufsize=1,
            start_new_session=True,
        )
        stream = f"{self.name}/algo-1-{int(time.time() * 1000)}"
        self.standin.logs.create_log_stream(logGroupName=LOG_GROUP, logStreamName=stream)
        threading.Thread(target=self._pump, args=(stream,), daemon=True).start()

    def _pump(self, stream: str) -> None:
        """Copy the container's output to CloudWatch Logs until it ends. Whatever happens to a line, the
        process is reaped and `ended` is set: the job's status thread waits on it."""
        try:
            for line in self.process.stdout:
                if not line.rstrip("\n"):
                    continue  # CloudWatch takes no empty event
                try:
                    self.standin.logs.put_log_events(
                        logGroupName=LOG_GROUP,
                        logStreamName=stream,
                        logEvents=[{"timestamp": int(time.time() * 1000), "message": line.rstrip("\n")}],
                    )
                except Exception:  # one lost line, not a job stuck InProgress
                    LOG.exception("stand-in: a log line of %s was lost", self.name)
        finally:
            self.process.wait()
            self.ended.set()

    def end(self, grace: float = 5.0) -> None:
        """End the program and everything it started (SIGTERM, SIGKILL after `grace`; 0: SIGKILL at once)."""
        from nbtoolkit.runner.tree import job_processes, terminate_tree

        if self.process is not None and self.process.poll() is None:
            if grace == 0:  # the instance is gone: everything at once, children that hold the log pipe too
                for process in job_processes(self.process.pid):
                    process.kill()
            terminate_tree(self.process.pid, grace=grace)
        self.ended.wait(30)


class SageMakerStandIn:
    """moto's server plus what it lacks; `env` is what processes need to reach it. A context manager."""

    def __init__(self, root: Path) -> None:
        from moto.server import ThreadedMotoServer

        self.root = root
        self.server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self.requests: dict[str, dict[str, Any]] = {}
        self.stop_requests: list[str] = []
        self.containers: dict[str, Container] = {}
        #: run each job's code (False: jobs stay Training until stopped, for request-only tests)
        self.run_containers = True
        #: argv a container runs instead of the job's entry script: a dry run whose request, input channels and
        #: model upload are real while its work is not (it may write SM_MODEL_DIR, which is uploaded as usual)
        self.dry_program: list[str] | None = None

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> None:
        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise
        self.root.mkdir(parents=True, exist_ok=True)
        self.server.start()
        host, port = self.server.get_host_and_port()
        config = self.root / "sagemaker-config.yaml"
        config.write_text(TELEMETRY_OPT_OUT)
        self.env = {
            "AWS_ENDPOINT_URL": f"http://{host}:{port}",
            "AWS_ACCESS_KEY_ID": "standin",
            "AWS_SECRET_ACCESS_KEY": "standin",
            "AWS_DEFAULT_REGION": REGION,
            "AWS_MAX_ATTEMPTS": "1",
            "SAGEMAKER_VALIDATE_ROLE": "false",
            "SAGEMAKER_USER_CONFIG_OVERRIDE": str(config),
            "NBTOOLKIT_SAGEMAKER_POLL_S": "0.3",
        }
        self._patches = self._patch_moto()
        self._clients()

    def __enter__(self) -> SageMakerStandIn:
        self.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def close(self) -> None:
        for container in list(self.containers.values()):
            container.end()
        for owner, name, original in self._patches:
            if original is None:
                delattr(owner, name)
            else:
                setattr(owner, name, original)
        self.server.stop()

    def _clients(self) -> None:
        import boto3

        session = boto3.Session(region_name=REGION, aws_access_key_id="standin", aws_secret_access_key="standin")
        endpoint = self.env["AWS_ENDPOINT_URL"]
        self.s3 = session.client("s3", endpoint_url=endpoint)
        self.logs = session.client("logs", endpoint_url=endpoint)
        self.s3.create_bucket(Bucket=BUCKET)
        self.logs.create_log_group(logGroupName=LOG_GROUP)

    # -- what moto lacks -----------------------------------------------------------------------

    def _patch_moto(self) -> list[tuple[type, str, Any]]:
        from moto.core.responses import ActionResult, EmptyResult
        from moto.iam.responses import IamResponse
        from moto.sagemaker.responses import SageMakerResponse

        standin, create = self, SageMakerResponse.create_training_job

        def create_training_job(response):
            request = json.loads(response.body)
            result = create(response)
            standin._created(request)
            return result

        def stop_training_job(response):
            standin._stop(json.loads(response.body)["TrainingJobName"])
            return EmptyResult()

        def simulate_principal_policy(response):
            actions = [value for key, value in response.querystring.items() if key.startswith("ActionNames.member")]
            return ActionResult(
                {
                    "EvaluationResults": [
                        {"EvalActionName": action[0], "EvalResourceName": "*", "EvalDecision": "allowed"}
                        for action in actions
                    ]
                }
            )

        patches = [
            (SageMakerResponse, "create_training_job", create_training_job),
            (SageMakerResponse, "stop_training_job", stop_training_job),
            (IamResponse, "simulate_principal_policy", simulate_principal_policy),
        ]
        originals = [(owner, name, owner.__dict__.get(name)) for owner, name, _ in patches]
        for owner, name, function in patches:
            setattr(owner, name, function)
        return originals

    def job(self, name: str):
        from moto.core.models import DEFAULT_ACCOUNT_ID
        from moto.sagemaker.models import sagemaker_backends

        return sagemaker_backends[DEFAULT_ACCOUNT_ID][REGION].training_jobs[name]

    def _set(self, name: str, status: str, secondary: str, message: str, **fields: Any) -> None:
        job, now = self.job(name), utc(time.time())
        transitions = job.secondary_status_transitions
        if transitions and "EndTime" not in transitions[-1]:
            transitions[-1]["EndTime"] = now
        transitions.append({"Status": secondary, "StartTime": now, "StatusMessage": message})
        job.training_job_status, job.secondary_status, job.last_modified_time = status, secondary, now
        for key, value in fields.items():
            setattr(job, key, value)

    def _created(self, request: dict[str, Any]) -> None:
        name = request["TrainingJobName"]
        self.requests[name] = request
        job = self.job(name)
        job.secondary_status_transitions = []
        job.environment = request.get("Environment", {})
        job.algorithm_specification = request["AlgorithmSpecification"]
        job.output_data_config = {"KmsKeyId": "", **request["OutputDataConfig"]}
        for attribute in ("training_start_time", "training_end_time", "final_metric_data_list", "model_artifacts"):
            delattr(job, attribute)
        self._set(name, "InProgress", "Starting", "Preparing the instances for training")
        threading.Thread(target=self._run, args=(name, request), daemon=True).start()

    def _run(self, name: str, request: dict[str, Any]) -> None:
        self._set(name, "InProgress", "Downloading", "Downloading input data")
        started = time.time()
        self._set(
            name,
            "InProgress",
            "Training",
            "Training image download completed. Training in progress.",
            training_start_time=utc(started),
        )
        if not self.run_containers:
            return
        while True:
            container = Container(self, name, request)
            self.containers[name] = container
            container.start()
            if name in self.stop_requests:  # a stop that came while it started (a restart fetches its channels)
                container.end()
            container.ended.wait()
            if not container.interrupted:
                break
            container.restartable.wait()
        if name in self.stop_requests:
            return self._finish(name, request, started, "Stopped", "Stopped", "Training job stopped on request")
        if container.process.returncode == 0:
            self._set(name, "InProgress", "Uploading", "Uploading generated training model")
            artifacts = {"S3ModelArtifacts": self.upload_model(container, request)}
            return self._finish(
                name, request, started, "Completed", "Completed", "Training job completed", model_artifacts=artifacts
            )
        return self._finish(
            name,
            request,
            started,
            "Failed",
            "Failed",
            "Training job failed",
            failure_reason=f"AlgorithmError: exit code {container.process.returncode}",
        )

    def _finish(
        self,
        name: str,
        request: dict[str, Any],
        started: float,
        status: str,
        secondary: str,
        message: str,
        **fields: Any,
    ) -> None:
        training = max(1, math.ceil(time.time() - started))
        spot = request.get("EnableManagedSpotTraining", False)
        billable = max(1, math.ceil(training * SPOT_BILLED_FRACTION)) if spot else training
        self._set(
            name,
            status,
            secondary,
            message,
            training_end_time=utc(time.time()),
            training_time_in_seconds=training,
            billable_time_in_seconds=billable,
            **fields,
        )

    def _stop(self, name: str) -> None:
        self.stop_requests.append(name)
        self._set(name, "Stopping", "Stopping", "Stopping the training job")
        container = self.containers.get(name)
        if container is not None:
            threading.Thread(target=container.end, daemon=True).start()
        else:  # nothing runs: stopped at once
            self._finish(name, self.requests[name], time.time(), "Stopped", "Stopped", "Training job stopped")

    def interrupt(self, name: str) -> None:
        """A spot interruption: the instance goes away (checkpoints already synced to S3), the job starts again
        on a new one with /opt/ml/checkpoints restored from S3."""
        container = self.containers[name]
        container.interrupted = True
        container.end(grace=0)
        checkpoint = self.requests[name].get("CheckpointConfig")
        local = container.root / "checkpoints"
        if checkpoint:  # SageMaker syncs the directory to S3 as files appear
            self.upload(local, checkpoint["S3Uri"])
        self._set(name, "InProgress", "Interrupted", "Spot capacity was interrupted")
        shutil.rmtree(local, ignore_errors=True)
        local.mkdir()
        if checkpoint:
            self.download(checkpoint["S3Uri"], local)
        self._set(name, "InProgress", "Starting", "Restarting the job after the interruption")
        self._set(name, "InProgress", "Training", "Training in progress")
        container.restartable.set()

    def interrupt_at_checkpoint(self, name: str, timeout: float = 300.0) -> None:
        """Interrupt the job right after its first checkpoint appears (frozen at once, so it cannot finish first)."""

        def watch() -> None:
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                container = self.containers.get(name)
                saved = container and list((container.root / "checkpoints").glob("checkpoint-*/trainer_state.json"))
                if container and container.process and saved and saved[0].read_text().rstrip().endswith("}"):
                    os.killpg(container.process.pid, signal.SIGSTOP)
                    return self.interrupt(name)
                time.sleep(0.02)

        threading.Thread(target=watch, daemon=True).start()

    # -- S3 and the job's code -------------------------------------------------------------------

    def download(self, uri: str, directory: Path) -> None:
        bucket, _, prefix = uri.removeprefix("s3://").partition("/")
        for page in self.s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            for item in page.get("Contents", []):
                target = directory / (item["Key"][len(prefix) :].lstrip("/") or Path(item["Key"]).name)
                target.parent.mkdir(parents=True, exist_ok=True)
                self.s3.download_file(bucket, item["Key"], str(target))

    def upload_model(self, container: Container, request: dict[str, Any]) -> str:
        """/opt/ml/model as SageMaker leaves it: model.tar.gz under <S3OutputPath>/<job name>/output/."""
        archive = container.root / "output" / "model.tar.gz"
        with tarfile.open(archive, "w:gz") as tar:
            for path in sorted((container.root / "model").iterdir()):
                tar.add(path, arcname=path.name)
        uri = f"{request['OutputDataConfig']['S3OutputPath'].rstrip('/')}/{container.name}/output/model.tar.gz"
        bucket, _, key = uri.removeprefix("s3://").partition("/")
        self.s3.upload_file(str(archive), bucket, key)
        return uri

    def upload(self, directory: Path, uri: str) -> None:
        bucket, _, prefix = uri.removeprefix("s3://").partition("/")
        for path in directory.rglob("*"):
            if path.is_file():
                self.s3.upload_file(str(path), bucket, f"{prefix.rstrip('/')}/{path.relative_to(directory)}")

    def entry_script(self, request: dict[str, Any]) -> str:
        """The entry script from the SDK's sourcecode.json in the sm_drivers channel."""
        channel = next(item for item in request["InputDataConfig"] if item["ChannelName"] == "sm_drivers")
        bucket, _, prefix = channel["DataSource"]["S3DataSource"]["S3Uri"].removeprefix("s3://").partition("/")
        source = json.loads(self.s3.get_object(Bucket=bucket, Key=f"{prefix}/sourcecode.json")["Body"].read())
        return source["entry_script"]

    def wait_status(self, name: str, status: str, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while self.job(name).training_job_status != status:
            if time.monotonic() > deadline:
                raise AssertionError(f"{name} is {self.job(name).training_job_status}, not {status}")
            time.sleep(0.1)
