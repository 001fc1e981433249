"""What a job does with the secrets it was given: a script that quotes its token as it fails (argparse does)
leaves the token in no file of the store and not in the job's message."""

from __future__ import annotations

import time

from tests.faults.jobs import submit_paced
from tests.test_secrets import SECRET, files_holding


def test_a_script_that_quotes_its_token_as_it_fails(store, monkeypatch, observe):
    monkeypatch.setenv("HF_TOKEN", SECRET)
    job = submit_paced(store, "--echo-token", "$HF_TOKEN", "--hf-token", "$HF_TOKEN", steps=3)
    status = job.wait(timeout=60)
    ended = time.monotonic()
    message = job.record.message or ""
    truth = (
        status == "failed"
        and "unrecognized arguments: --hf-token ***" in message
        and files_holding(SECRET, store.home) == []
    )
    observe(job, "a script that quotes its token as it fails", truth, ended)
