"""The `nbtoolkit` command: export (and its run.sh by hand), run --follow, jobs/show/logs, errors."""

from __future__ import annotations

import json
import subprocess

import yaml

from nbtoolkit.metrics.series import read_metrics
from nbtoolkit.spec import load_spec
from tests.conftest import PYTHON

SPEC = {"task": "text-classification", "train": {"max_steps": 20, "batch_size": 16, "logging_steps": 10}}


def nbtoolkit(*args, check=True, **kwargs):
    return subprocess.run(
        [PYTHON, "-m", "nbtoolkit.cli", *args], capture_output=True, text=True, timeout=180, check=check, **kwargs
    )


def test_launch_files_writes_a_run_sh_that_reproduces_the_run(tmp_path, home):
    spec_path = tmp_path / "spec.yaml"
    spec_path.write_text(yaml.safe_dump(SPEC))
    out = tmp_path / "export"
    result = nbtoolkit("launch-files", str(spec_path), "--out", str(out))
    assert "# command: " in result.stdout and "-m nbtoolkit.train --spec spec.json" in result.stdout
    assert sorted(path.name for path in out.iterdir()) == ["launch.json", "run.sh", "spec.json"]
    saved = json.loads((out / "spec.json").read_text())
    assert saved["train"]["logging_steps"] == 10 and saved["precision"] == "fp32"  # in full, defaults included
    assert load_spec(out / "spec.json") == load_spec(SPEC)
    assert not (home / "jobs.db").exists() or "no jobs yet" in nbtoolkit("jobs").stdout  # export starts nothing
    ran = subprocess.run([str(out / "run.sh")], capture_output=True, text=True, timeout=180, cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert [record["step"] for record in read_metrics(out) if record["kind"] == "train"] == [10, 20]


def test_run_follow_then_jobs_show_logs(tmp_path, home):
    spec_path = tmp_path / "spec.json"
    spec_path.write_text(json.dumps(SPEC))
    result = nbtoolkit("run", str(spec_path), "--follow")
    assert "[nbtoolkit] step 20/20 (100%)" in result.stdout
    # one line per logging step: nbtoolkit's, not also the Trainer's dict; its evaluation as numbers
    assert [line.split(" (")[0] for line in result.stdout.splitlines() if line.startswith("[nbtoolkit] step")] == [
        "[nbtoolkit] step 10/20",
        "[nbtoolkit] step 20/20",
    ]
    assert "{'loss'" not in result.stdout and "[nbtoolkit] eval at epoch " in result.stdout
    job_id = result.stdout.split()[1]
    assert result.stdout.rstrip().endswith(f"job {job_id} succeeded")
    listing = nbtoolkit("jobs").stdout
    assert listing.splitlines()[0].split()[:4] == ["id", "name", "backend", "status"]
    assert job_id in listing and "succeeded" in listing and "20/20" in listing
    rows = json.loads(nbtoolkit("jobs", "--json").stdout)
    assert rows[0]["id"] == job_id and rows[0]["backend"] == "local"
    shown = nbtoolkit("show", job_id[:4]).stdout
    assert "last eval: eval_loss" in shown and "eval_accuracy" in shown
    assert "stage train succeeded" in nbtoolkit("logs", job_id).stdout
    assert "{'loss': '" in nbtoolkit("logs", job_id, "--raw").stdout  # the program's own output, as written
    for lines in (5, 8):  # the tail of what the console shows: a dropped Trainer dict does not count
        assert len(nbtoolkit("logs", job_id, "-n", str(lines)).stdout.splitlines()) == lines
    assert json.loads(nbtoolkit("show", job_id, "--json").stdout)["exit_code"] == 0


def test_errors_are_one_line_and_exit_2(tmp_path, home):
    spec_path = tmp_path / "bad.yaml"
    spec_path.write_text(
        "task: text-classification\nparallelism: {strategy: deepspeed, zero_stage: 1, offload_params: cpu}\n"
    )
    result = nbtoolkit("run", str(spec_path), check=False)
    assert result.returncode == 2
    assert result.stderr == (
        "nbtoolkit: parallelism.offload_params 'cpu' needs ZeRO stage 3 (zero_stage is 1); "
        "set zero_stage: 3 or offload_params: none\n"
    )
    missing = nbtoolkit("show", "0000ffff", check=False)
    assert missing.returncode == 2 and missing.stderr.startswith("nbtoolkit: no job '0000ffff'")


def test_an_unknown_status_filter_names_the_statuses_as_words(home):
    refused = nbtoolkit("jobs", "--status", "paused", check=False)
    assert refused.returncode == 2
    assert refused.stderr.rstrip().endswith(
        "invalid choice: 'paused' (choose from 'queued', 'running', 'succeeded', 'failed', 'stopped', 'lost')"
    )


def test_run_leaves_no_unclosed_file_and_a_reader_that_leaves_gets_no_traceback(tmp_path, home):
    script = tmp_path / "quick.py"
    script.write_text("print('done')\n")
    spec_path = tmp_path / "spec.yaml"
    spec_path.write_text(f"task: causal-lm\nscript: {{path: {script}}}\n")
    ran = subprocess.run(
        [PYTHON, "-W", "always::ResourceWarning", "-m", "nbtoolkit.cli", "run", str(spec_path)],
        capture_output=True,
        text=True,
        timeout=180,
        check=True,
    )
    assert "unclosed" not in ran.stderr and "supervisor.log" not in ran.stderr
    for _ in range(3):  # a listing longer than a pipe's first reads
        nbtoolkit("run", str(spec_path))
    listing = subprocess.Popen([PYTHON, "-m", "nbtoolkit.cli", "jobs"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    listing.stdout.close()  # `| head -0`: the reader is gone before the listing is written
    assert listing.wait(timeout=60) == 1
    assert listing.stderr.read() == b""


def test_every_console_view_takes_raw():
    """The docs list run, logs and demo as taking --raw; demo refused it."""
    from nbtoolkit.cli import build_parser

    for argv in (["run", "spec.yaml", "--raw"], ["logs", "abc", "--raw"], ["demo", "--raw"]):
        assert build_parser().parse_args(argv).raw is True


def test_a_grpo_job_lists_its_reward_and_show_names_each_samples_per_second(store, capsys):
    """A grpo job's loss stays near 0 whatever it learns: listings show its reward; `show` says which pace is which."""
    from nbtoolkit.cli import main
    from nbtoolkit.launching.runtime import SPEC_FILE
    from nbtoolkit.metrics.series import Progress

    records = [
        {"time": float(step), "step": step, "kind": "train", "loss": 0.0, "reward": reward, "samples_per_second": pace}
        for step, reward, pace in [(1, 0.25, 30.0), (2, 0.5, 42.0), (3, 0.75, 48.0)]
    ]
    progress = Progress()
    progress.update(records)
    record = store.create(name="arithmetic", task="grpo", backend="local")
    store.update(
        record.id,
        status="succeeded",
        started=0.0,
        ended=10.0,
        step=progress.step,
        loss=progress.loss,
        reward=progress.reward,
        samples_per_second=progress.samples_per_second,
    )
    folder = store.job_dir(record.id)
    (folder / SPEC_FILE).write_text(load_spec({"task": "grpo"}).model_dump_json())
    (folder / "metrics.jsonl").write_text("".join(json.dumps(item) + "\n" for item in records))

    assert main(["jobs"]) == 0
    header, row = capsys.readouterr().out.splitlines()
    assert "reward" in header.split() and "0.750" in row.split() and "0.0000" not in row
    assert main(["show", record.id]) == 0
    shown = capsys.readouterr().out
    assert "samples/s: 48.0 (last logging window)" in shown
    assert "steady samples/s" in shown and "reward: 0.750" in shown


def test_export_of_a_job_id_is_its_model_and_a_wrong_flag_says_so_before_the_job_is_looked_up(
    home, capsys, tmp_path, monkeypatch
):
    """`nbtoolkit export ID --format ...` exports a job's model (a spec file still gets its launch files); --quant
    belongs to gguf, and gguf without llama.cpp's environment names the make target that builds it."""
    from nbtoolkit.cli import main

    assert main(["export", "0a1b2c3d", "--format", "merged", "--quant", "q8_0"]) != 0
    assert (
        capsys.readouterr()
        .err.strip()
        .endswith("--quant is for --format gguf; a merged export keeps the trained weights' own dtype")
    )
    monkeypatch.setenv("NBTOOLKIT_LLAMA_ENV", str(tmp_path / "no-env"))
    assert main(["export", "0a1b2c3d", "--format", "gguf", "--quant", "q4_k_m"]) != 0
    assert f"--format gguf needs llama.cpp's environment at {tmp_path / 'no-env'}, which is not built; run `make " in (
        capsys.readouterr().err
    )
    assert main(["export", "0a1b2c3d"]) != 0  # an id, not a file: a job's model, and there is no such job
    assert "no job '0a1b2c3d'" in capsys.readouterr().err


def test_export_of_a_spec_file_still_writes_its_launch_files_and_names_their_verb(tmp_path, home, capsys):
    from nbtoolkit.cli import main

    spec_path = tmp_path / "spec.yaml"
    spec_path.write_text(yaml.safe_dump(SPEC))
    assert main(["export", str(spec_path), "--out", str(tmp_path / "old")]) == 0
    said = capsys.readouterr()
    assert said.err.strip() == (
        f"nbtoolkit: export takes a job id now; a spec's launch files are `nbtoolkit launch-files {spec_path}`"
    )
    assert "# command: " in said.out
    assert sorted(path.name for path in (tmp_path / "old").iterdir()) == ["launch.json", "run.sh", "spec.json"]
