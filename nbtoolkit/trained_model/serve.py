"""A finished job's model behind an OpenAI-compatible HTTP server, run as a job of its own: `nbtoolkit serve ID`.

On CPU the server is transformers' own (`transformers serve`, transformers/cli/serve.py): it renders each
conversation with the served folder's chat template (`processor.apply_chat_template(..., add_generation_prompt=True)`,
transformers/cli/serving/chat_completion.py:138) and stops at the folder's generation_config.json end tokens
(`copy.deepcopy(model.generation_config)`, transformers/cli/serving/utils.py:1177). So it serves the job's merged
export (written first when absent): the export puts the trained template and the end of turn exactly there. As a job
in the store it outlives the kernel, is listed by `nbtoolkit jobs`, the panel and `%jobs` (its name carries its URL),
keeps its log, and `nbtoolkit stop ID` ends it and every process it started.
"""

from __future__ import annotations

import errno
import importlib.util
import json
import shlex
import socket
import sys
import time
import urllib.error
import urllib.request
import warnings
from pathlib import Path

from nbtoolkit.backends import LaunchError
from nbtoolkit.launching.launch import Launch, Stage, free_port
from nbtoolkit.runner.control import log_tail, submit
from nbtoolkit.runner.store import JobRecord, JobStore
from nbtoolkit.tasks import TASKS

SERVE_TASK = "serve"
#: what `transformers serve` imports beyond transformers (the `serve` extra)
SERVING_PACKAGES = ("fastapi", "uvicorn", "openai", "pydantic")
DEFAULT_HOST, DEFAULT_PORT = "127.0.0.1", 8000
#: seconds a new server gets to load its model and answer /health (20 s measured for the tiny chat model on 2 cores)
READY_S = 180.0
#: the job key naming the job whose model is served, and the one holding the server's URL
SERVES_KEY, URL_KEY = "serves", "url"


#: the addresses only this machine reaches
LOOPBACK = ("127.0.0.1", "localhost", "::1")


def serve(job, *, port: int = DEFAULT_PORT, host: str = DEFAULT_HOST, wait_s: float = READY_S) -> JobRecord:
    """Start the server of the job's merged model as a job of its own; its record, once /health answers."""
    check_serving_installed()
    if not 1 <= port <= 65535:
        raise LaunchError(f"--port {port} is not a port to listen on; give one of 1-65535")
    check_port_free(host, port)
    folder = served_folder(job)
    if host not in LOOPBACK:
        warnings.warn(
            f"the server listens on {host}, with no authentication: anyone who reaches this machine's port {port} "
            "can use the model (and reads the folder it is served from in its answers)",
            stacklevel=3,
        )
    url = f"http://{host}:{port}"
    record = submit(
        server_launch(folder, host, port),
        name=f"serve {job.id} {url}/v1",
        task=SERVE_TASK,
        store=job.store,
        info={SERVES_KEY: job.id, URL_KEY: url},
    )
    try:
        wait_ready(job.store, record.id, url, wait_s)
    except KeyboardInterrupt:  # the server goes on as the job it is: say which, and how to end it
        raise LaunchError(
            f"stopped waiting for job {record.id}, which goes on starting the server at {url}/v1; "
            f"`nbtoolkit stop {record.id}` ends it"
        ) from None
    return job.store.get(record.id)


def served_folder(job) -> Path:
    """The job's merged export (written now when absent): its weights, its trained template and its end tokens."""
    from nbtoolkit.trained_model.export import export_model, has_chat_template

    if job.record.task == SERVE_TASK:
        raise LaunchError(f"job {job.id} is a server itself; serve the job it serves, {job.record.info[SERVES_KEY]}")
    task = job.spec.task
    if TASKS[task].head != "causal-lm":
        raise LaunchError(
            f"job {job.id} is a {task} job; serve speaks the chat API, for language models (causal-lm, chat, "
            "preference and grpo jobs): use job.predict for this one"
        )
    folder = export_model(job, "merged")  # the job's export/merged, written before or now
    if not has_chat_template(folder):
        raise LaunchError(
            f"job {job.id}'s model has no chat template (a {task} job on a base model), and the server's chat API "
            "renders every conversation with one; train it as a chat job (dataset.chat_template names one), or use "
            "job.predict"
        )
    return folder


def server_launch(folder: Path, host: str, port: int) -> Launch:
    """`transformers serve FOLDER` on the CPU: the folder's weights in their own dtype, nothing fetched."""
    argv = [sys.executable, "-m", "transformers.cli.transformers", "serve", str(folder)]
    argv += ["--host", host, "--port", str(port), "--device", "cpu", "--dtype", "auto", "--log-level", "info"]
    # the model is on disk: the CLI's update check and the loaders reach nothing outside
    return Launch(backend="local", stages=[Stage(SERVE_TASK, argv, env={"HF_HUB_OFFLINE": "1"})])


def check_serving_installed() -> None:
    """transformers serve needs these beside transformers (`is_serve_available`, transformers/utils/import_utils.py:972)."""
    missing = [name for name in SERVING_PACKAGES if importlib.util.find_spec(name) is None]
    if missing:
        raise LaunchError(
            f"nbtoolkit serve needs {', '.join(missing)} here; install the serve extra: "
            "pip install 'nbtoolkit-finetune[serve]'"
        )


def check_port_free(host: str, port: int) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((host, port))
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                raise LaunchError(f"--host {host} cannot be listened on here ({exc.strerror})") from None
            raise LaunchError(
                f"port {port} on {host} is in use already; give --port another (e.g. --port {free_port(host)})"
            ) from None


def wait_ready(store: JobStore, server_id: str, url: str, wait_s: float) -> None:
    """Until the server answers /health; its job's last log lines when it ends first or stays silent."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        if not store.get(server_id).active:
            raise LaunchError(
                f"the server (job {server_id}) ended before answering: {log_tail(server_id, 5, store=store)}"
            )
        time.sleep(0.5)
    raise LaunchError(
        f"the server (job {server_id}) did not answer {url}/health within {wait_s:.0f} s; "
        f"`nbtoolkit logs {server_id}` shows why, `nbtoolkit stop {server_id}` ends it"
    )


def chat_reply(url: str, messages: list[dict], max_tokens: int = 64) -> dict:
    """The server's greedy next turn of a conversation, as `Job.predict` gives one (64 tokens, like predict's)."""
    body = json.dumps({"messages": messages, "max_tokens": max_tokens, "temperature": 0}).encode()
    request = urllib.request.Request(
        f"{url}/v1/chat/completions", data=body, headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=READY_S) as response:
            answer = json.loads(response.read())
    except (urllib.error.URLError, OSError) as exc:
        raise LaunchError(
            f"the server at {url} did not answer ({exc}); `nbtoolkit jobs` shows whether it runs"
        ) from None
    return {"reply": answer["choices"][0]["message"]["content"], "prompt_tokens": answer["usage"]["prompt_tokens"]}


def curl_command(url: str, message: str = "Hello!") -> str:
    """A ready `curl` of the server's chat endpoint (greedy, a few tokens)."""
    body = {"messages": [{"role": "user", "content": message}], "max_tokens": 64, "temperature": 0}
    return shlex.join(
        ["curl", f"{url}/v1/chat/completions", "-H", "Content-Type: application/json", "-d", json.dumps(body)]
    )
