"""`nbtoolkit serve ID`: a tiny chat job's model behind transformers' OpenAI-compatible server, as a job of its own.

One chat job (2 steps) and one server of it, shared: the server's prompt is the training template's rendering token
for token (its count, and the same greedy answer as nbtoolkit's own predict), `nbtoolkit jobs` and the panel's REST list it with its URL,
the Try-it chat talks to it, a second server on its port is refused in one sentence, and `nbtoolkit stop` closes the port and ends its processes
(one test: its stop ends the server the module shares).
"""

from __future__ import annotations

import json
import urllib.request

import psutil
import pytest

from nbtoolkit.api import launch
from nbtoolkit.cli import main
from nbtoolkit.launching.launch import free_port
from nbtoolkit.runner import JobStore
from nbtoolkit.runner.tree import tagged_processes
from nbtoolkit.server.service import JobsService
from nbtoolkit.trained_model.serve import URL_KEY

pytestmark = pytest.mark.heavy  # a training job and a server process: run first under pytest -n

CONVERSATION = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "What is 2 + 3?"},
]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """(the chat job, its running server job, the store's home)."""
    home = tmp_path_factory.mktemp("nbhome")
    store = JobStore(home)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("OMP_NUM_THREADS", "1")
        trained = launch({"task": "chat", "train": {"max_steps": 2, "batch_size": 4}}, store=store)
        assert trained.wait(timeout=300) == "succeeded", trained.logs(tail=20)
        server = trained.serve(port=free_port("127.0.0.1"))
    yield trained, server, home
    server.stop()  # when the last test failed before its own stop


def chat(url: str, max_tokens: int) -> dict:
    body = json.dumps({"messages": CONVERSATION, "max_tokens": max_tokens, "temperature": 0}).encode()
    request = urllib.request.Request(
        f"{url}/v1/chat/completions", data=body, headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=120) as response:
        return json.loads(response.read())


def answers_with_the_trained_template_as_predict_does(served) -> None:
    """The server's prompt is the training template's rendering (its count), its greedy answer predict's."""
    from transformers import AutoTokenizer

    from nbtoolkit.train.chat_template import chat_tokenizer

    trained, server, _ = served
    as_trained = chat_tokenizer(trained.spec).apply_chat_template(
        CONVERSATION, add_generation_prompt=True, return_dict=True
    )["input_ids"]
    served_folder = trained.dir / "export" / "merged"
    assert AutoTokenizer.from_pretrained(served_folder).chat_template == chat_tokenizer(trained.spec).chat_template
    answer = chat(server.record.info[URL_KEY], max_tokens=64)  # predict's MAX_NEW_TOKENS, greedy like it
    assert answer["usage"]["prompt_tokens"] == len(as_trained) > 10
    predicted = trained.predict(CONVERSATION)
    assert answer["choices"][0]["message"]["content"] == predicted["reply"] != ""
    box = server.try_it()  # the Try-it chat, talking to the server
    box.history, box.text.value = CONVERSATION[:1], CONVERSATION[1]["content"]
    assert box.ask()["reply"] == predicted["reply"] and box.history[-1]["content"] == predicted["reply"]
    assert box.last["prompt_tokens"] == len(as_trained)  # the server's count: the answer came through it
    assert "the server at http://127.0.0.1:" in box.children[0].value


def test_the_server_answers_as_trained_is_listed_with_its_url_and_stop_closes_its_port(served, capsys):
    """One test, so no order can stop the shared server before it answered (the suite runs in random order)."""
    answers_with_the_trained_template_as_predict_does(served)
    trained, server, home = served
    url = server.record.info[URL_KEY]
    port = url.rsplit(":", 1)[1]
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("NBTOOLKIT_HOME", str(home))
        assert main(["jobs"]) == 0
        line = next(line for line in capsys.readouterr().out.splitlines() if line.startswith(server.id))
        assert f"serve {trained.id} {url}/v1" in line and "running" in line
    panel = JobsService(JobStore(home))  # what the panel's job list and detail read over REST
    listed = {job.id: job for job in panel.list().jobs}
    assert listed[server.id].name == f"serve {trained.id} {url}/v1" and listed[server.id].status == "running"
    assert listed[server.id].url == f"{url}/v1" and listed[trained.id].url is None  # the row's link
    assert panel.get(server.id).status == "running"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("NBTOOLKIT_HOME", str(home))
        assert main(["serve", trained.id, "--port", port]) == 2
        assert f"port {port} on 127.0.0.1 is in use already; give --port another" in capsys.readouterr().err
        for wrong in ("0", "70000"):  # no port the printed URL could name
            assert main(["serve", trained.id, "--port", wrong]) == 2
            assert f"--port {wrong} is not a port to listen on; give one of 1-65535" in capsys.readouterr().err
        pids = [process.pid for process in tagged_processes(server.id, home)]
        assert len(pids) >= 2  # the supervisor and the server
        assert main(["stop", server.id]) == 0
    assert f"job {server.id} stopped" in capsys.readouterr().out
    assert not [pid for pid in pids if psutil.pid_exists(pid) and psutil.Process(pid).status() != "zombie"]
    with pytest.raises(OSError):
        urllib.request.urlopen(f"{url}/health", timeout=2)
    assert "stage serve stopped" in server.logs()  # its log stays readable
    assert panel.get(server.id).url is None  # a stopped server links nowhere
