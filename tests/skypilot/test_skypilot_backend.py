"""The SkyPilot backend: its block's problems, the task YAML, what each node runs, the golden of a real
render, and the follower run as a job against a stand-in of SkyPilot's client API (tests/skypilot/fake_sky:
SkyPilot needs a cloud, and its 0.14 releases pin click<8.2, which the locked transformers' huggingface-hub
cannot share an environment with). SkyPilot's own loader checks the YAML in the environment of its own
that `make test-setup` builds from requirements-skypilot.lock (.venv-skypilot).

    python -m tests.skypilot.test_skypilot_backend    # write the golden again (then read the diff)
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from nbtoolkit import backends
from nbtoolkit.api import attach, launch
from nbtoolkit.backends import dispatch
from nbtoolkit.planner import plan
from nbtoolkit.spec import SpecError, load_spec
from tests.real_launches import golden_files
from tests.test_jobs import wait_for

pytestmark = pytest.mark.heavy  # minutes of real training: run first under pytest -n (tests/conftest.py)

HERE = Path(__file__).resolve().parent
GOLDEN_SPEC = HERE / "flan-t5-xl-skypilot.yaml"
GOLDEN = HERE / "golden" / "flan-t5-xl-skypilot"
FAKE_SKY = HERE / "fake_sky"
TINY = {
    "task": "text-classification",
    "hardware": {"target": "skypilot", "accelerator": "cuda"},
    "skypilot": {"accelerators": "T4:1"},
    "train": {"max_steps": 2},
}


def skypilot_spec(**changes):
    data = {**TINY, **changes}
    return load_spec(data)


def write_files(files: dict[str, str], folder: Path) -> Path:
    for name, text in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return folder


# -- the block's problems: one sentence, naming the field --------------------------------------


@pytest.mark.parametrize(
    "changes, sentence",
    [
        (
            {"skypilot": {"accelerators": "A100 x 8"}},
            "skypilot.accelerators 'A100 x 8' is not a GPU name and count; write NAME:COUNT, e.g. A100:8",
        ),
        (
            {"skypilot": {"accelerators": "T4:1", "fallbacks": [{"accelerators": "L4:1", "zone": "a"}]}},
            "skypilot.fallbacks.0.zone is not a known field; valid fields of skypilot.fallbacks.0 are accelerators, cloud, region",
        ),
        (
            {"skypilot": {"accelerators": "T4:1", "fallbacks": [{"accelerators": "L4:2"}]}},
            "skypilot.fallbacks.0.accelerators 'L4:2' gives 2 GPU(s) per node, but hardware.devices is 1; make them agree",
        ),
        (
            {"skypilot": {"accelerators": "T4:1", "spot": True}},
            (
                "skypilot.spot is not a known field; valid fields of skypilot are accelerators, cloud, region, use_spot, fallbacks, "
                "bucket, bucket_mode, managed"
            ),
        ),
        (
            {"skypilot": {"accelerators": "T4:1", "bucket": "my-bucket"}},
            (
                "skypilot.bucket 'my-bucket' is not a bucket URL; give e.g. s3://my-bucket/checkpoints or "
                "gs://my-bucket/checkpoints"
            ),
        ),
        (
            {"skypilot": {"accelerators": "T4:1", "region": "us-east-1"}},
            "skypilot.region 'us-east-1' needs skypilot.cloud (a region belongs to one cloud), e.g. aws",
        ),
        (
            {"skypilot": {"accelerators": "T4:1", "managed": False}},
            (
                "skypilot.managed false is not supported: nbtoolkit launches managed jobs (they recover after a preemption); "
                "remove managed or set it true"
            ),
        ),
        (
            {"skypilot": {"accelerators": "A100:8"}},
            "skypilot.accelerators 'A100:8' gives 8 GPU(s) per node, but hardware.devices is 1; make them agree",
        ),
        (
            {"skypilot": None},
            (
                "skypilot.accelerators is missing; name the GPU and count per node, e.g. A100:8, or a hardware.instance_type "
                "the catalog knows"
            ),
        ),
        (
            {"script": {"path": "train.py"}},
            (
                "script is not shipped to SkyPilot nodes (they get the job's folder only); remove script to run nbtoolkit's "
                "own training program"
            ),
        ),
        (
            {"hardware": {"target": "skypilot", "accelerator": "cpu"}},
            (
                "hardware.accelerator 'cpu' does not run on SkyPilot here; a SkyPilot target runs on cloud GPUs: set "
                "hardware.accelerator: cuda"
            ),
        ),
    ],
)
def test_a_bad_skypilot_setting_is_one_sentence_naming_its_field(changes, sentence):
    with pytest.raises(SpecError) as raised:
        skypilot_spec(**changes)
    assert str(raised.value) == sentence


def test_a_catalog_instance_gives_the_accelerators_and_the_planner_its_shape_and_price():
    spec = skypilot_spec(hardware={"target": "skypilot", "instance_type": "p4d.24xlarge", "nodes": 2}, skypilot={})
    task = yaml.safe_load(dispatch.render(spec).files["skypilot/task.yaml"])
    assert task["resources"] == {"use_spot": False, "accelerators": "A100:8", "instance_type": "p4d.24xlarge"}
    result = plan(spec, alternatives=False)
    assert (result.devices_per_node, result.nodes, result.accelerator) == (8, 2, "A100-40GB")
    assert result.hourly_price_usd == 32.7726  # per instance-hour: catalog.yaml's p4d.24xlarge


def test_without_an_instance_type_the_plan_counts_the_nodes_and_the_price_stays_unknown():
    spec = load_spec(GOLDEN_SPEC.read_text())
    result = plan(spec, alternatives=False)
    assert (result.devices_per_node, result.nodes, result.hourly_price_usd) == (8, 2, None)


def test_the_form_offers_skypilot_says_its_blocks_problem_and_keeps_a_prefilled_block():
    from nbtoolkit.notebook.form import SpecForm

    form = SpecForm({"task": "text-classification"})
    assert "skypilot" in dict(form.fields["hardware.target"].options)
    form.fields["hardware.accelerator"].value = "cuda"
    form.fields["hardware.target"].value = "skypilot"
    assert form.spec is None and form.error.startswith("skypilot.accelerators is missing;")
    prefilled = SpecForm(skypilot_spec(skypilot={"accelerators": "T4:1", "use_spot": True}))
    assert prefilled.spec.skypilot.model_dump(exclude_defaults=True) == {"accelerators": "T4:1", "use_spot": True}
    assert "skypilot/task.yaml" in dispatch.render(prefilled.spec).files


# -- the task YAML and what each node runs -------------------------------------------------------


def test_the_task_has_resources_with_ordered_fallbacks_nodes_the_bucket_setup_and_run():
    launch_ = dispatch.render(load_spec(GOLDEN_SPEC.read_text()))
    task = yaml.safe_load(launch_.files["skypilot/task.yaml"])
    assert task["resources"] == {
        "use_spot": True,
        "ordered": [{"accelerators": "A100:8"}, {"accelerators": "A10G:8"}, {"accelerators": "L4:8"}],
    }
    assert (task["name"], task["num_nodes"], task["workdir"]) == ("flan-t5-xl-skypilot", 2, "skypilot/workdir")
    assert task["file_mounts"] == {
        "~/sky_workdir/output": {"source": "s3://my-team-checkpoints/flan-t5-xl", "mode": "MOUNT_CACHED"}
    }
    assert "pip install 'nbtoolkit-finetune[deepspeed]==0.1.0'" in task["setup"]
    assert 'bash run.sh "$SKYPILOT_NODE_RANK"' in task["run"]
    node = json.loads(launch_.files["skypilot/workdir/spec.json"])
    assert node["resume"] == "latest" and node["hardware"]["target"] == "local" and "skypilot" not in node
    assert launch_.main_stage.stop_grace_s and launch_.main_stage.metrics_from_log
    assert not any("restarts from step 0" in note for note in launch_.notes)
    single = dispatch.render(skypilot_spec())  # one node, one GPU, no bucket: plain python, and a warning
    tracked = yaml.safe_load(
        dispatch.render(skypilot_spec(report_to=["wandb", "tensorboard"])).files["skypilot/task.yaml"]
    )
    assert tracked["setup"].splitlines()[1:] == [
        "pip install nbtoolkit-finetune==0.1.0",
        "pip install 'nbtoolkit-finetune[trackers]'",
        "pip install wandb",
    ]
    assert "python -m nbtoolkit.train --spec spec.json" in single.files["skypilot/workdir/run.sh"]
    assert "no skypilot.bucket: checkpoints stay on the nodes, so a recovered job restarts from step 0" in single.notes


def run_node(launch_, tmp_path: Path, rank: int) -> list[str]:
    """Run the task's `run` in its workdir as SkyPilot would on node `rank` of 2 (IPs 10.0.0.1, 10.0.0.2, 4 GPUs
    each), with a `python` that prints its arguments: what the node would start."""
    folder = write_files(launch_.files, tmp_path / f"node{rank}") / "skypilot" / "workdir"
    bin_dir = tmp_path / f"bin{rank}"
    bin_dir.mkdir()
    (bin_dir / "python").write_text('#!/bin/sh\nprintf "%s\\n" "$@"\n')
    (bin_dir / "python").chmod(0o755)
    env = {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "SKYPILOT_NODE_RANK": str(rank),
        "SKYPILOT_NODE_IPS": "10.0.0.1\n10.0.0.2\n",
        "SKYPILOT_NUM_NODES": "2",
        "SKYPILOT_NUM_GPUS_PER_NODE": "4",
    }
    run = yaml.safe_load(launch_.files["skypilot/task.yaml"])["run"]
    done = subprocess.run(["bash", "-c", run], cwd=folder, env=env, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_each_node_runs_torchrun_with_skypilots_rank_master_and_gpus(tmp_path):
    spec = skypilot_spec(
        hardware={"target": "skypilot", "accelerator": "cuda", "devices": 4, "nodes": 2},
        parallelism={"strategy": "ddp"},
        skypilot={"accelerators": "A10G:4"},
    )
    launch_ = dispatch.render(spec)
    head, worker = run_node(launch_, tmp_path, 0), run_node(launch_, tmp_path, 1)
    assert head[:1] == ["-m"] and "torch.distributed.run" in head
    for argv, rank in ((head, 0), (worker, 1)):
        assert {
            "--nnodes=2",
            "--nproc_per_node=4",
            "--rdzv_endpoint=10.0.0.1:29500",
            f"--node_rank={rank}",
            f"--rdzv_conf=is_host={int(rank == 0)}",
            "nbtoolkit.train",
        } <= set(argv)


def test_each_node_runs_deepspeeds_launcher_with_skypilots_rank_master_and_gpus(tmp_path):
    spec = load_spec(GOLDEN_SPEC.read_text())
    argv = run_node(dispatch.render(spec), tmp_path, 1)
    assert argv[:2] == ["-m", "deepspeed.launcher.runner"]
    assert {
        "--hostfile=hostfile",
        "--no_ssh",
        "--node_rank=1",
        "--master_addr=10.0.0.1",
        "--num_gpus=4",
        "--master_port=29500",
    } <= set(argv)


def start_nodes(launch_, folder: Path, log_name: str) -> list[str]:
    """Both nodes' `run` on this machine, as SkyPilot starts them (127.0.0.1 for each node's IP): their logs."""
    run = yaml.safe_load(launch_.files["skypilot/task.yaml"])["run"]
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
        "SKYPILOT_NODE_IPS": "127.0.0.1\n127.0.0.1\n",
        "SKYPILOT_NUM_NODES": "2",
        "SKYPILOT_NUM_GPUS_PER_NODE": "1",
    }
    logs = [folder.parent / f"{log_name}-node{rank}.log" for rank in (0, 1)]
    nodes = [
        subprocess.Popen(
            ["bash", "-c", run],
            cwd=folder,
            env={**env, "SKYPILOT_NODE_RANK": str(rank)},
            stdout=log.open("w"),
            stderr=subprocess.STDOUT,
        )
        for rank, log in enumerate(logs)
    ]
    try:
        codes = [node.wait(timeout=300) for node in nodes]
    finally:
        for node in nodes:
            node.kill()
    texts = [log.read_text() for log in logs]
    assert codes == [0, 0], texts
    return texts


def test_two_nodes_started_by_skypilots_run_train_as_one_job_and_a_recovered_one_resumes(tmp_path):
    """Real torchrun and training (tiny BERT, CPU): the two nodes meet at the first of SKYPILOT_NODE_IPS; then,
    as after a preemption with the bucket holding checkpoint-2, the run again continues from it."""
    spec = skypilot_spec(
        hardware={"target": "skypilot", "accelerator": "cuda", "devices": 1, "nodes": 2},
        parallelism={"strategy": "ddp"},
        train={"max_steps": 4, "save_steps": 2, "logging_steps": 1},
    )
    launch_ = dispatch.render(spec)
    folder = write_files(launch_.files, tmp_path) / "skypilot" / "workdir"
    logs = "".join(start_nodes(launch_, folder, "first"))
    assert "[rank0]:[nbtoolkit] step 4/4" in logs and "[rank1]:[nbtoolkit] step 4/4" in logs
    output = folder / "output"
    assert {"checkpoint-2", "checkpoint-4", "model"} <= {path.name for path in output.iterdir()}
    for lost in ("checkpoint-4", "model"):  # what the preempted run had not yet saved to the bucket
        shutil.rmtree(output / lost)
    logs = "".join(start_nodes(launch_, folder, "recovered"))
    assert "[rank0]:[nbtoolkit] resuming from output/checkpoint-2" in logs  # the node's output/: the bucket
    assert "[rank0]:[nbtoolkit] step 3/4" in logs and "step 1/4" not in logs and (output / "checkpoint-4").is_dir()


def test_the_real_render_is_the_reviewed_golden():
    rendered = golden_files(load_spec(GOLDEN_SPEC.read_text()))
    kept = {path.relative_to(GOLDEN).as_posix(): path.read_text() for path in GOLDEN.rglob("*") if path.is_file()}
    assert sorted(rendered) == sorted(kept), "regenerate: python -m tests.skypilot.test_skypilot_backend"
    for name, text in rendered.items():
        assert text == kept[name], f"{name} changed: python -m tests.skypilot.test_skypilot_backend, review the diff"


def test_skypilots_own_loader_reads_the_task_and_takes_a_token_only_at_launch(tmp_path, skypilot_python):
    """The golden task as SkyPilot reads it; and with `extra.hub_token: $HF_TOKEN`, a task that names HF_TOKEN as a
    secret without its value, which SkyPilot's loader takes as the follower gives it (`--secret HF_TOKEN`)."""
    write_files(dispatch.render(load_spec(GOLDEN_SPEC.read_text())).files, tmp_path / "golden")
    mine = tmp_path / "mine.jsonl"  # a local data file: copied to every node by the task's file_mounts
    mine.write_text('{"text": "my own row", "label": "calm"}\n')
    files = dispatch.render(
        skypilot_spec(extra={"hub_token": "$HF_TOKEN"}, dataset={"files": {"train": str(mine)}})
    ).files
    assert yaml.safe_load(files["skypilot/task.yaml"])["secrets"] == {"HF_TOKEN": None}
    node = load_spec(files["skypilot/workdir/spec.json"])
    assert node.dataset.files == {"train": "/tmp/nbtoolkit-data/train/mine.jsonl"}
    write_files(files, tmp_path / "token")
    check = (
        "import json, os, sky, yaml; t = sky.Task.from_yaml('golden/skypilot/task.yaml'); "
        "print(json.dumps([t.name, t.num_nodes, sorted(str(r.accelerators) for r in t.resources), "
        "[r.use_spot for r in t.resources], sorted(t.storage_mounts), t.run])); "
        "config = yaml.safe_load(open('token/skypilot/task.yaml')); "
        "s = sky.Task.from_yaml_config(config, secrets_overrides=[('HF_TOKEN', os.environ['HF_TOKEN'])]); "
        "print(json.dumps([s.secrets['HF_TOKEN'].get_secret_value() == os.environ['HF_TOKEN'], "
        "len(s.managed_secret_refs), s.file_mounts]))"
    )
    env = {**os.environ, "HF_TOKEN": "hf_NODESECRET12345"}
    done = subprocess.run(
        [skypilot_python, "-c", check], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    name, nodes, accelerators, spot, mounts, run = json.loads(done.stdout.splitlines()[-2])
    assert (name, nodes, spot) == ("flan-t5-xl-skypilot", 2, [True, True, True])
    assert accelerators == ["{'A100': 8}", "{'A10G': 8}", "{'L4': 8}"] and len(mounts) == 1
    assert 'bash run.sh "$SKYPILOT_NODE_RANK"' in run
    # the value reached the task, as no reference; the data file is SkyPilot's to copy to the node's path
    assert json.loads(done.stdout.splitlines()[-1]) == [True, 0, {"/tmp/nbtoolkit-data/train/mine.jsonl": str(mine)}]
    assert "hf_NODESECRET12345" not in "".join(files.values())


# -- preflight -------------------------------------------------------------------------------------


@pytest.fixture
def fake_sky(tmp_path, monkeypatch):
    """SkyPilot's client API stood in for, here and in the jobs this test starts."""
    monkeypatch.syspath_prepend(str(FAKE_SKY))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(FAKE_SKY), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("FAKE_SKY_DIR", str(tmp_path))
    for name in ("sky", "sky.jobs", "sky.client", "sky.client.sdk"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    return tmp_path


def test_preflight_refuses_without_skypilot(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *args: None if name == "sky" else real(name, *args))
    with pytest.raises(backends.LaunchError, match=r"^SkyPilot is not installed here; install it with pip install "):
        dispatch.preflight(skypilot_spec())


@pytest.mark.parametrize(
    "clouds, block, sentence",
    [
        ("", {}, "SkyPilot has no enabled cloud; run sky check and set up the credentials of a cloud it lists"),
        (
            "aws,kubernetes",
            {"cloud": "gcp"},
            (
                "skypilot.cloud 'gcp' is not enabled in SkyPilot (enabled: aws, kubernetes); run sky check gcp or pick an "
                "enabled cloud"
            ),
        ),
    ],
)
def test_preflight_refuses_without_an_enabled_cloud(fake_sky, monkeypatch, clouds, block, sentence):
    monkeypatch.setenv("FAKE_SKY_CLOUDS", clouds)
    with pytest.raises(backends.LaunchError) as raised:
        dispatch.preflight(skypilot_spec(skypilot={"accelerators": "T4:1", **block}))
    assert str(raised.value) == sentence


# -- the follower, run as a job --------------------------------------------------------------------

#: as SkyPilot streams a 2-node torchrun job: c10d may put global rank 0 on the worker node (it did in
#: test_two_nodes_...), and DeepSpeed's launcher prints without rank prefixes
LOG = """\
\x1b[36m(head, rank=0, pid=2114)\x1b[0m [rank1]:{'loss': '9.999', 'grad_norm': '1.0', 'learning_rate': '0.00035', 'epoch': '0.2'}
(worker1, rank=1, pid=1998, ip=10.0.0.2) [rank0]:{'loss': '4.766', 'grad_norm': '2.056', 'learning_rate': '0.00035', 'epoch': '0.2'}
(worker1, rank=1, pid=1998, ip=10.0.0.2) {'loss': '8.888', 'grad_norm': '1.0', 'learning_rate': '0.00035', 'epoch': '0.2'}
(head, rank=0, pid=2114) {'loss': '3.5', 'grad_norm': '1.5', 'learning_rate': '0.0002', 'epoch': '0.4'}
"""


def calls(folder: Path) -> list[dict]:
    path = folder / "calls.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_the_follower_launches_the_task_streams_rank_zeros_metrics_and_succeeds(fake_sky, store):
    (fake_sky / "log.txt").write_text(LOG)
    job = launch(skypilot_spec(), store=store)
    assert job.wait(timeout=120) == "succeeded", job.logs()
    launched = next(call for call in calls(fake_sky) if call["call"] == "launch")
    assert launched["name"] == launched["task"]["name"] == "text-classification-tiny-bert"
    assert Path(launched["cwd"]).resolve() == job.dir.resolve()  # where task.yaml's relative workdir is
    assert job.record.remote_name == "sky-managed-7" and job.record.info["skypilot_job_id"] == 7
    losses = [record["loss"] for record in job.records() if record["kind"] == "train" and "loss" in record]
    assert losses == [4.766, 3.5]
    assert "\n[node1]: {'loss': '8.888'" in job.logs() and "managed job 7 succeeded" in job.logs()


def test_the_follower_gives_the_tasks_secrets_their_values_at_launch(fake_sky, store, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_NODESECRET12345")
    (fake_sky / "log.txt").write_text(LOG)
    job = launch(skypilot_spec(extra={"hub_token": "$HF_TOKEN"}), store=store)
    assert job.wait(timeout=120) == "succeeded", job.logs()
    launched = next(call for call in calls(fake_sky) if call["call"] == "launch")
    assert launched["secrets"] == {"HF_TOKEN": len("hf_NODESECRET12345")}  # the stand-in records lengths only


def test_a_failed_managed_job_fails_the_job_with_one_sentence(fake_sky, store, monkeypatch):
    (fake_sky / "log.txt").write_text("(head, rank=0, pid=1) Traceback: CUDA out of memory\n")
    monkeypatch.setenv("FAKE_SKY_END", "100")
    job = launch(skypilot_spec(), store=store)
    assert job.wait(timeout=120) == "failed"
    assert job.record.message == ("SkyPilot managed job 7 failed; sky jobs logs --controller 7 says why")


def test_a_launch_skypilot_refuses_fails_the_job_with_its_reason_on_one_line(fake_sky, store, monkeypatch):
    monkeypatch.setenv(
        "FAKE_SKY_LAUNCH_ERROR",
        "Failed to provision all possible launchable resources.\n"
        "  Relax the task's resource requirements: 2x AWS([Spot], {'A100': 8})",
    )
    job = launch(skypilot_spec(), store=store)
    assert job.wait(timeout=120) == "failed"
    assert job.record.message == (
        "SkyPilot could not run the managed job: Failed to provision all possible launchable "
        "resources. Relax the task's resource requirements: 2x AWS([Spot], {'A100': 8})"
    )


def test_stop_cancels_the_managed_job(fake_sky, store, monkeypatch):
    (fake_sky / "log.txt").write_text(LOG)
    monkeypatch.setenv("FAKE_SKY_END", "wait")
    job = launch(skypilot_spec(), store=store)
    wait_for(lambda: [record for record in job.records() if record["kind"] == "train"], timeout=120)
    assert job.stop() == "stopped"
    assert [call["job_ids"] for call in calls(fake_sky) if call["call"] == "cancel"] == [[7]]
    assert "cancelling managed job 7" in job.logs()


def test_attach_follows_a_managed_job_launched_elsewhere_and_stop_cancels_it(fake_sky, store, monkeypatch):
    (fake_sky / "log.txt").write_text(LOG)
    monkeypatch.setenv("FAKE_SKY_END", "wait")
    job = attach("7", backend="skypilot", store=store)
    wait_for(lambda: [record for record in job.records() if record["kind"] == "train"], timeout=120)
    assert job.record.remote_name == "sky-managed-7" and job.stop() == "stopped"
    assert [call["call"] for call in calls(fake_sky)] == ["tail_logs", "cancel"]
    with pytest.raises(
        backends.LaunchError, match="^'sky-managed-7' is not a SkyPilot managed job id; give the number"
    ):
        attach("sky-managed-7", backend="skypilot", store=store)


def write_golden() -> None:
    for path in GOLDEN.rglob("*") if GOLDEN.exists() else []:
        if path.is_file():
            path.unlink()
    write_files(golden_files(load_spec(GOLDEN_SPEC.read_text())), GOLDEN)
    print(f"wrote {GOLDEN}")


if __name__ == "__main__":
    write_golden()
