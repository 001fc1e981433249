"""Secrets a job was given are in no file and no answer: what a launcher echoes, what a script prints or
fails with, the Trainer's pickled arguments, per-rank logs, the store, the REST service. Real jobs on the
local, torchrun and DeepSpeed launchers (CPU, a tiny BERT, one step); the scrubber's stream cut anywhere.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import zipfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nbtoolkit.api import launch
from nbtoolkit.launching.credentials import REDACTED, Scrubber, secret_values
from nbtoolkit.runner.scrub import CHUNK_BYTES, RankStreams, scrub_job_files
from nbtoolkit.server.service import LOG_LIMIT_MAX, JobsService
from nbtoolkit.spec import load_spec
from tests.conftest import SCRIPTS

pytestmark = pytest.mark.heavy  # a DeepSpeed and a torchrun job: run first under pytest -n

SECRET = "hf_SECRETVALUE24abcdef"
PACED = SCRIPTS / "paced.py"
ONE_STEP = {"max_steps": 1, "save_steps": 1, "batch_size": 4, "logging_steps": 1}
TOKEN_IN_EXTRA = {"extra": {"hub_token": "$HF_TOKEN"}, "train": ONE_STEP}
CASES = {
    # nbtoolkit's program: extra.hub_token reaches the Trainer; checkpoints pickle its TrainingArguments
    "local-program-extra": ({"task": "text-classification", **TOKEN_IN_EXTRA}, "succeeded"),
    # two ranks print the token they were given: torchrun tees it into output.log and its per-rank log files
    "torchrun-script-args": (
        {
            "task": "text-classification",
            "hardware": {"devices": 2},
            "script": {"path": str(SCRIPTS / "paced.py"), "args": ["--steps", "1", "--echo-token", "$HF_TOKEN"]},
        },
        "succeeded",
    ),
    # the DeepSpeed launcher logs its whole command line; the script echoes its arguments and saves a model
    "deepspeed-script-args": (
        {
            "task": "text-classification",
            "launcher": "deepspeed",
            "parallelism": {"strategy": "deepspeed", "zero_stage": 2},
            "script": {
                "path": str(SCRIPTS / "token_trainer.py"),
                "args": ["--hf_token", "$HF_TOKEN", "--deepspeed", "$NBTOOLKIT_JOB_DIR/ds_config.json", "--use_cpu"],
            },
        },
        "succeeded",
    ),
    # argparse quotes what it refuses: "unrecognized arguments: --hf-token <value>", the job's message
    "local-script-refusing-the-token": (
        {
            "task": "text-classification",
            "script": {"path": str(SCRIPTS / "paced.py"), "args": ["--steps", "1", "--hf-token", "$HF_TOKEN"]},
        },
        "failed",
    ),
}


def files_holding(secret: str, root: Path) -> list[str]:
    """Every file under `root` whose bytes hold `secret`, the members of zip files (torch.save) read too."""
    needle = secret.encode()
    found = []
    for path in root.rglob("*"):
        if not path.is_file() or path.is_symlink():
            continue
        data = path.read_bytes()
        inside = zipfile.is_zipfile(path) and any(
            needle in zipfile.ZipFile(path).read(name) for name in zipfile.ZipFile(path).namelist()
        )
        if needle in data or inside:
            found.append(str(path.relative_to(root)))
    return found


def readable_in(secret: str, root: Path) -> list[str]:
    """Every file under `root` where `secret` can be read once each rank's pieces are rejoined: torchrun's tee
    writes what a rank prints in pieces, each after the rank's prefix (`[rank0]:h[rank1]:h[rank0]:f...`)."""
    found = []
    for path in root.rglob("*"):
        if not path.is_file() or path.is_symlink():
            continue
        if any(secret.encode() in text for text in rank_texts(path.read_bytes()).values()):
            found.append(str(path.relative_to(root)))
    return found


def test_a_token_two_ranks_print_a_character_at_a_time_is_in_no_file(home, store, monkeypatch):
    """Each character reaches torchrun's tee on its own, and the log holds it after the rank's prefix; the token
    is in a variable whose name no earlier list knew for a credential's."""
    monkeypatch.setenv("KAGGLE_KEY", SECRET)
    args = ["--steps", "1", "--pace", "0", "--dribble-env", "KAGGLE_KEY"]
    spec = {"task": "text-classification", "hardware": {"devices": 2}, "script": {"path": str(PACED), "args": args}}
    job = launch(spec, store=store)
    assert job.wait(timeout=120) == "succeeded", job.logs(tail=40)
    assert readable_in(SECRET, home) == [] and files_holding(SECRET, home) == []
    assert job.logs().count(f"[rank0]:{REDACTED}") == job.logs().count(f"[rank1]:{REDACTED}") == 1


def rest_answers(store, job_id: str) -> str:
    """What the REST API serves for the job (its service layer; the handlers add only HTTP)."""
    service = JobsService(store)
    answers = [service.list(), service.get(job_id), service.log(job_id, limit=LOG_LIMIT_MAX), service.metrics(job_id)]
    return "".join(answer.model_dump_json() for answer in answers)


@pytest.mark.parametrize("case", list(CASES))
def test_a_token_given_each_way_is_in_no_file_and_no_answer(case, home, store, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", SECRET)
    spec, status = CASES[case]
    job = launch(spec, store=store)
    assert job.wait(timeout=300) == status, job.logs(tail=40)
    assert files_holding(SECRET, home) == []
    assert SECRET not in rest_answers(store, job.id)
    output = job.dir / "output"
    if case.endswith("-extra"):  # the Trainer's pickled arguments were written, and hold no token
        assert (output / "checkpoint-1" / "training_args.bin").is_file() and (output / "model").is_dir()
    elif case == "torchrun-script-args":  # each rank got the value; the logs hold what no scrubber knows of it
        assert job.logs().count(f"token seen: *** reversed {SECRET[::-1]}") == 2
        assert len([path for path in (job.dir / "logs").rglob("*.log") if "reversed" in path.read_text()]) == 2
    elif case == "deepspeed-script-args":
        assert "--hf_token ***" in job.logs() and "arguments: [" in job.logs()  # the launcher and the script echoed
        assert (output / "training_args.bin").is_file()
    else:
        assert "unrecognized arguments: --hf-token ***" in job.record.message


def test_the_trainer_gets_a_token_from_the_environment_not_its_pickled_arguments(monkeypatch):
    from nbtoolkit.train.program import training_arguments

    monkeypatch.setenv("MY_HUB_SECRET", SECRET)
    monkeypatch.setenv("HF_TOKEN", "")  # recorded, so the token the code under test sets is taken away after
    monkeypatch.delenv("HF_TOKEN")
    spec = load_spec(
        {"task": "text-classification", "extra": {"hub_token": "$MY_HUB_SECRET", "lr_scheduler_type": "cosine"}}
    )
    args = training_arguments(spec, "unused", has_eval=False)
    assert args.hub_token is None and args.lr_scheduler_type == "cosine"
    assert os.environ["HF_TOKEN"] == SECRET  # where huggingface_hub looks for it


def test_secret_values_are_credential_named_variables_and_resolved_references():
    environ = {"HF_TOKEN": SECRET, "MY_VAR": "valueofmyvar", "TOKENIZERS_PARALLELISM": "false", "X_TOKEN": "1"}
    assert secret_values(environ) == {SECRET}  # a short switch is not a secret; a tokenizer setting not a token
    assert secret_values(environ, ["MY_VAR", "UNSET"]) == {SECRET, "valueofmyvar"}
    wider = {
        "KAGGLE_KEY": "kaggle-value",
        "GITHUB_PAT": "github-value",
        "HF_AUTH": "auth-value",
        "DB_PASS": "pass-word",
        "PGPASSWORD": "postgres-word",
        "MYSQL_PWD": "mysql-word",
    }
    paths = {
        "OLDPWD": "/home/me/before",
        "SSH_AUTH_SOCK": "/tmp/ssh-agent.1",
        "KEY_FILE": "/home/me/key.pem",
        "PATH": "/usr/bin:/bin",
        "PWD": "/work",
    }
    assert secret_values({**wider, **paths}) == set(wider.values())  # a credential's name, not a path's
    urls = {"DATABASE_URL": "postgres://me:db%2Fsecret-1@db.example/x", "HOME_PAGE": "https://example.org/@me"}
    assert secret_values(urls) == {"db%2Fsecret-1"}  # any URL's password, whatever its variable is called
    scrubber = Scrubber(secret_values(urls))
    assert scrubber.text("db%2Fsecret-1 db/secret-1 db%2Fsecret-1") == "*** *** ***"  # as given, and unquoted
    assert Scrubber(["pass word+1"]).text("u=pass%20word%2B1") == "u=***"  # a password put in a URL, quoted


def test_a_secret_printed_stripped_or_json_escaped_is_scrubbed():
    """A token set with spaces around it, printed as programs use it (stripped); one with a quote, a backslash
    and a non-ASCII letter, printed by `json.dumps`."""
    padded = Scrubber(secret_values({"HF_TOKEN": f" {SECRET}\n"}))
    assert padded.text(f"token={SECRET}.") == "token=***."
    quoted = 'pa"ss\\wörd-9'
    for printed in (json.dumps({"password": quoted}), json.dumps({"password": quoted}, ensure_ascii=False)):
        assert Scrubber([quoted]).text(printed) == '{"password": "***"}'


@settings(max_examples=300, deadline=None)
@given(
    before=st.text(max_size=40),
    after=st.text(max_size=40),
    cuts=st.lists(st.integers(min_value=0, max_value=200), max_size=8),
)
def test_a_stream_cut_anywhere_is_scrubbed_like_the_whole(before, after, cuts):
    secrets = [SECRET, "another-secret-99"]
    data = f"{before}{SECRET}{after}--hf_token {SECRET[:9]}{secrets[1]}{SECRET}".encode()
    scrubber = Scrubber(secrets)
    edges = sorted({0, len(data), *(cut for cut in cuts if cut < len(data))})
    streamed = b"".join(scrubber.feed(data[start:end]) for start, end in itertools.pairwise(edges))
    streamed += scrubber.flush()
    assert streamed == Scrubber(secrets).scrubbed(data)
    assert SECRET.encode() not in streamed and secrets[1].encode() not in streamed
    assert streamed.count(REDACTED.encode()) >= 3


def rank_texts(log: bytes) -> dict[bytes, bytes]:
    """Each rank's text in a log torchrun teed (b"": the text before any prefix), its pieces rejoined."""
    pieces = re.split(rb"(\[rank\d+\]:)", log)
    ranks = {b"": pieces[0]}
    for rank, piece in zip(pieces[1::2], pieces[2::2], strict=True):
        ranks[rank] = ranks.get(rank, b"") + piece
    return ranks


@settings(max_examples=300, deadline=None)
@given(
    texts=st.lists(st.text(st.sampled_from("ab\n_é"), max_size=12), min_size=2, max_size=2),
    pieces=st.lists(st.integers(1, 6), min_size=1, max_size=40),
    order=st.lists(st.integers(0, 1), max_size=80),
    cuts=st.lists(st.integers(0, 400), max_size=8),
)
def test_ranks_teed_in_pieces_of_any_size_are_scrubbed_rank_by_rank(texts, pieces, order, cuts):
    """torchrun's tee writes each piece a rank printed after its prefix, the ranks' pieces interleaved (`order`);
    the supervisor reads the whole cut anywhere (`cuts`). Each rank's text comes out scrubbed, prefixed as it was."""
    ranks = [f"{text}{SECRET}{text[::-1]}\n".encode() for text in texts]
    split: list[list[bytes]] = [[], []]
    for rank, data in enumerate(ranks):
        sizes = itertools.cycle(pieces)
        while data:
            size = min(next(sizes), data.find(b"\n") + 1 or len(data))  # a piece is at most a line, as readline
            split[rank].append(data[:size])
            data = data[size:]
    teed = b""
    for rank in [*order, *[0] * len(split[0]), *[1] * len(split[1])]:
        if split[rank]:
            teed += f"[rank{rank}]:".encode() + split[rank].pop(0)
    streams = RankStreams(Scrubber([SECRET]))
    edges = sorted({0, len(teed), *(cut for cut in cuts if cut < len(teed))})
    log = b"".join(streams.feed(teed[start:end]) for start, end in itertools.pairwise(edges)) + streams.flush()
    expected = Scrubber([SECRET]).scrubbed
    assert rank_texts(log) == {b"": b"", b"[rank0]:": expected(ranks[0]), b"[rank1]:": expected(ranks[1])}
    assert all(line.startswith((b"[rank0]:", b"[rank1]:")) for line in log.splitlines())


def test_a_rank_log_of_any_size_is_scrubbed_whole_with_its_mode(tmp_path):
    """Over 64 MiB a rank's log was skipped; a secret cut across two chunks is found too."""
    rank_log = tmp_path / "logs" / "run_0" / "attempt_0" / "1" / "stdout.log"
    rank_log.parent.mkdir(parents=True)
    filler = b"x" * (CHUNK_BYTES - 5)  # the first secret straddles the first chunk's end
    with open(rank_log, "wb") as handle:
        handle.write(filler + SECRET.encode() + b"\n" + b"y" * (65 << 20) + SECRET.encode() + b"\n")
    rank_log.chmod(0o600)
    output = tmp_path / "output" / "notes.txt"  # the program's outputs are its own
    output.parent.mkdir()
    output.write_text(SECRET)
    notes: list[str] = []
    scrub_job_files(tmp_path, Scrubber([SECRET]), notes.append)
    assert notes == [] and rank_log.stat().st_mode & 0o777 == 0o600
    with open(rank_log, "rb") as handle:
        assert handle.read(len(filler) + len(REDACTED) + 1) == filler + REDACTED.encode() + b"\n"
    assert files_holding(SECRET, tmp_path) == ["output/notes.txt"]
    assert rank_log.stat().st_size == len(filler) + (65 << 20) + 2 * (len(REDACTED) + 1)


@pytest.mark.parametrize("cut", range(0, 40, 3))
def test_a_rank_that_prints_its_own_prefix_keeps_it(cut):
    """torch's C++ warnings begin `[rank0]:` themselves, so the tee writes `[rank0]:[rank0]:[W...`; the line comes
    out as the launcher wrote it (a Slurm job's log holds its slurm-<id>.out lines whole), however it is read."""
    teed = b"[rank0]:[rank0]:[W reducer.cpp] Warning\n[rank1]:step 1\n"
    streams = RankStreams(Scrubber([SECRET]))
    assert streams.feed(teed[:cut]) + streams.feed(teed[cut:]) + streams.flush() == teed
