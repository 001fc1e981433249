"""A rehearsal reaches nothing outside this machine: of `extra` it keeps an allow-list, says what it dropped,
and its training processes, run with every outside connection blocked and recorded, attempt none."""

from __future__ import annotations

import json
import os

from nbtoolkit.rehearsal.rehearse import REHEARSED_EXTRA, rehearsal, rehearse

#: the push that a rehearsal must never make, beside a setting it keeps
PUSHING = {
    "task": "text-classification",
    "model": "bert-base-uncased",
    "extra": {
        "push_to_hub": True,
        "hub_model_id": "me/production-model",
        "hub_strategy": "end",
        "hub_token": "$HF_TOKEN",
        "lr_scheduler_type": "cosine",
    },
    "sagemaker": {"role": "arn:aws:iam::111122223333:role/sm", "checkpoint_s3_uri": "s3://my-bucket/checkpoints"},
    "hardware": {"target": "sagemaker", "instance_type": "ml.g5.xlarge"},
}

#: a sitecustomize for the rehearsal's processes: any connection or name lookup beyond loopback is refused
#: and written to $NETWORK_GUARD_LOG
GUARD = """\
import json, os, socket

LOCAL = ("127.0.0.1", "::1", "localhost", "0.0.0.0")


def _refuse(what):
    with open(os.environ["NETWORK_GUARD_LOG"], "a") as log:
        log.write(json.dumps(str(what)) + "\\n")
    raise OSError("network blocked by the rehearsal test's guard: " + str(what))


_connect, _lookup = socket.socket.connect, socket.getaddrinfo


def connect(self, address):
    if self.family in (socket.AF_INET, socket.AF_INET6) and address[0] not in LOCAL:
        _refuse(address)
    return _connect(self, address)


def getaddrinfo(host, *args, **kwargs):
    if host not in LOCAL and host is not None:
        _refuse(host)
    return _lookup(host, *args, **kwargs)


socket.socket.connect, socket.getaddrinfo = connect, getaddrinfo
"""


def test_a_rehearsal_keeps_an_allow_list_of_extra_and_says_what_it_dropped():
    plan = rehearsal(PUSHING, max_ranks=1)
    assert plan.specs[0]["extra"] == {"lr_scheduler_type": "cosine"} and "lr_scheduler_type" in REHEARSED_EXTRA
    assert "sagemaker" not in plan.specs[0] and plan.specs[0]["hardware"]["target"] == "local"
    assert (
        "not rehearsed: extra.push_to_hub, extra.hub_model_id, extra.hub_strategy, extra.hub_token (a rehearsal "
        "keeps only the extra settings that shape training here; it pushes, uploads and reports nowhere"
    ) in "\n".join(plan.notes)


def test_a_rehearsal_of_a_pushing_spec_makes_no_network_call(store, tmp_path, monkeypatch):
    """Also with MLflow: its telemetry (a lookup of config.mlflow-telemetry.io) is off only because every run
    starts with it disabled, not because the test runs under pytest or CI (MLflow checks for both)."""
    guard = tmp_path / "guard"
    guard.mkdir()
    (guard / "sitecustomize.py").write_text(GUARD)
    attempts = tmp_path / "attempts.jsonl"
    attempts.touch()
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(guard), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("NETWORK_GUARD_LOG", str(attempts))
    monkeypatch.setenv("HF_TOKEN", "hf_NOTAREALTOKEN0000")
    for offline in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):  # the guard alone stops them
        monkeypatch.delenv(offline, raising=False)
    for testing in ("PYTEST_CURRENT_TEST", "CI", "GITHUB_ACTIONS"):
        monkeypatch.delenv(testing, raising=False)
    report = rehearse(
        {**PUSHING, "report_to": ["mlflow"]}, workdir=tmp_path / "rehearsal", store=store, max_ranks=1, timeout=300
    )
    assert report.passed, report
    assert [json.loads(line) for line in attempts.read_text().splitlines()] == []
    assert "note: not rehearsed: extra.push_to_hub, extra.hub_model_id" in str(report)
    launched = json.loads((store.job_dir(report.jobs[0]) / "launch.json").read_text())
    assert launched["env"]["HF_HUB_OFFLINE"] == "1"  # the Hub libraries themselves refuse the network
