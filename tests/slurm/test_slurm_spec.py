"""A Slurm spec without a cluster: its sentences, its pure render (golden, quoting, requeue), plan, form, preflight."""

from __future__ import annotations

import shlex

import pytest

from nbtoolkit.backends import LaunchError, backend_name, dispatch
from nbtoolkit.backends.dispatch import preflight
from nbtoolkit.planner import plan
from nbtoolkit.spec import SpecError, load_spec
from tests.slurm.cluster import missing_programs
from tests.slurm.golden import SPEC, kept, rendered

TINY = "task: text-classification\nhardware: {target: slurm, accelerator: cpu, devices: 2}\n"

INVALID = [
    (
        TINY + "slurm: {partition: 'gpu; rm -rf /'}",
        (
            "slurm.partition 'gpu; rm -rf /' may hold only letters, digits, '.', '_' and '-' and start with a letter or "
            "digit, e.g. gpu"
        ),
    ),
    (
        TINY + "slurm: {account: '-A other'}",
        (
            "slurm.account '-A other' may hold only letters, digits, '.', '_' and '-' and start with a letter or digit, "
            "e.g. my-lab"
        ),
    ),
    (
        TINY + "slurm: {time_limit: '2 hours'}",
        (
            "slurm.time_limit '2 hours' is not a Slurm time limit; give minutes (e.g. 90) or HH:MM:SS (e.g. 12:00:00) or "
            "D-HH:MM:SS (e.g. 2-00:00:00)"
        ),
    ),
    (
        TINY + "slurm: {time_limit: 0}",
        (
            "slurm.time_limit 0 is not a Slurm time limit; give minutes (e.g. 90) or HH:MM:SS (e.g. 12:00:00) or "
            "D-HH:MM:SS (e.g. 2-00:00:00)"
        ),
    ),
    (
        TINY + "slurm: {time_limit: '00:00:00'}",
        (
            "slurm.time_limit '00:00:00' is not a Slurm time limit; give minutes (e.g. 90) or HH:MM:SS (e.g. 12:00:00) or "
            "D-HH:MM:SS (e.g. 2-00:00:00)"
        ),
    ),
    (
        TINY + "slurm: {requeue: maybe}",
        "slurm.requeue: 'maybe' is not valid (input should be a valid boolean, unable to interpret input)",
    ),
    (
        TINY + "slurm: {queue: gpu}",
        "slurm.queue is not a known field; valid fields of slurm are partition, time_limit, account, requeue",
    ),
    (
        "task: causal-lm\nslurm: {partition: gpu}",
        (
            "the slurm block applies to hardware.target 'slurm' (it is 'local'); set hardware.target: slurm or remove "
            "the block"
        ),
    ),
    (
        "task: causal-lm\nhardware: {target: slurm, accelerator: neuron, devices: 2}",
        "hardware.accelerator 'neuron' cannot run under hardware.target 'slurm'; use cuda or cpu",
    ),
    (
        "task: causal-lm\nhardware: {target: slurm}\nlauncher: sagemaker",
        "launcher 'sagemaker' cannot run under hardware.target 'slurm'; use auto, torchrun or deepspeed",
    ),
    (
        "task: causal-lm\nhardware: {target: slurm, nodes: 2, node_rank: 1}",
        "hardware.node_rank is set by Slurm on each node (SLURM_NODEID); remove it",
    ),
]


@pytest.mark.parametrize(("text", "message"), INVALID, ids=[message[:40] for _, message in INVALID])
def test_each_bad_slurm_field_gets_its_sentence(text, message):
    with pytest.raises(SpecError) as caught:
        load_spec(text)
    assert str(caught.value) == message


@pytest.mark.parametrize("limit", [90, "90", "30:00", "12:00:00", "2-00:00:00", "1-12", "1-12:30"])
def test_slurm_time_limits_in_slurms_forms_are_taken(limit):
    assert load_spec({**load_spec(TINY).to_dict(), "slurm": {"time_limit": limit}}).slurm.time_limit == limit


def test_a_slurm_spec_renders_in_the_slurm_backend_whatever_its_launcher():
    for launcher in ("auto", "torchrun", "deepspeed"):
        spec = load_spec(TINY + f"launcher: {launcher}\nparallelism: {{strategy: deepspeed}}")
        assert backend_name(spec) == "slurm"
        assert dispatch.render(spec).backend == "slurm"


def test_the_realistic_slurm_launch_is_the_reviewed_golden():
    """2 nodes x 8 A100, DeepSpeed ZeRO-3 of the FLAN-T5 XXL spec (tests/slurm/golden.py writes it again)."""
    assert sorted(rendered()) == sorted(kept()), "regenerate: python -m tests.slurm.golden, then review the diff"
    for name, text in rendered().items():
        assert text == kept()[name], f"{name} changed: python -m tests.slurm.golden, review the diff"


def test_the_golden_runs_torchrun_on_each_node_with_the_allocations_rendezvous():
    golden = kept()
    sbatch = golden["sbatch.sh"]
    for option in (
        "--nodes=2",
        "--ntasks-per-node=1",
        "--gpus-per-node=8",
        "--partition=gpu",
        "--time=2-00:00:00",
        "--account=nlp-lab",
        "--requeue",
        "--output=slurm-%j.out",
    ):
        assert f"#SBATCH {option}\n" in sbatch
    assert 'MASTER_ADDR="$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n1)"' in sbatch
    assert sbatch.rstrip().endswith(
        """srun --ntasks-per-node=1 --kill-on-bad-exit=1 bash -c 'exec bash node.sh "$SLURM_NODEID"'"""
    )
    node = golden["node.sh"]
    for option in (
        '--nnodes="$SLURM_NNODES"',
        "--nproc_per_node=8",
        '--node_rank="$NODE_RANK"',
        '--rdzv_endpoint="$MASTER_ADDR:$MASTER_PORT"',
        '--rdzv_id="$SLURM_JOB_ID"',
        "--rdzv_backend=c10d",
    ):
        assert f" {option} " in node
    assert '"resume": "latest"' in golden["spec.json"] and '"stage": 3' in golden["ds_config.json"]


def test_deepspeeds_own_launcher_gets_the_allocations_master_too():
    spec = load_spec(SPEC.read_text())
    data = spec.model_dump(mode="json")
    data["launcher"] = "deepspeed"
    node = dispatch.render(load_spec(data)).files["node.sh"]
    assert (
        '--node_rank="$NODE_RANK" --master_addr="$MASTER_ADDR" --num_gpus=8 --master_port="$MASTER_PORT" '
        "--module nbtoolkit.train"
    ) in node


def test_user_text_reaches_the_scripts_quoted(tmp_path):
    script = tmp_path / "my train.py"
    script.write_text("print('hi')\n")
    spec = load_spec(
        {
            "task": "causal-lm",
            "name": "x",
            "hardware": {"target": "slurm", "devices": 2},
            "script": {"path": str(script), "args": ["--note", "$(touch /tmp/pwned)", "--nnodes=7"]},
        }
    )
    files = dispatch.render(spec).files
    node = files["node.sh"]
    assert shlex.quote(str(script)) in node and "'$(touch /tmp/pwned)'" in node
    assert " --nnodes=7" in node, "the script's own arguments are not the launcher's"
    assert "pwned" not in files["sbatch.sh"]
    assert '"resume": null' in files["spec.json"], "requeue resumes nbtoolkit's own program only"


def test_requeue_resumes_from_the_last_checkpoint_and_can_be_turned_off():
    spec = load_spec(TINY + "train: {save_steps: 5}")
    launch = dispatch.render(spec)
    assert '"resume": "latest"' in launch.files["spec.json"] and "#SBATCH --requeue\n" in launch.files["sbatch.sh"]
    assert "a requeued job resumes from its last checkpoint in output/" in launch.notes
    off = dispatch.render(load_spec(TINY + "slurm: {requeue: false}")).files
    assert '"resume": null' in off["spec.json"] and "#SBATCH --no-requeue\n" in off["sbatch.sh"]
    no_saves = dispatch.render(load_spec(TINY)).notes
    assert "requeue without train.save_steps: a requeued job restarts from step 0 (it has no checkpoint)" in no_saves


def test_rendering_a_slurm_spec_binds_no_port_here():
    launch = dispatch.render(load_spec(TINY))
    assert "MASTER_PORT=$(( 20000 + SLURM_JOB_ID % 20000 ))" in launch.files["sbatch.sh"]
    given = dispatch.render(
        load_spec("task: text-classification\nhardware: {target: slurm, devices: 2, master_port: 29777}")
    ).files["sbatch.sh"]
    assert "MASTER_PORT=29777\n" in given


def test_preflight_says_how_to_get_slurm_when_sbatch_is_missing(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(LaunchError) as caught:
        preflight(load_spec(TINY))
    assert str(caught.value) == (
        "hardware.target 'slurm' submits with sbatch, which is not on PATH here; run "
        "nbtoolkit on a Slurm login node, or install Slurm's client tools (e.g. apt-get "
        "install slurm-client)"
    )


def test_a_slurm_spec_plans_its_nodes_and_says_the_price_is_unknown():
    result = plan(load_spec(SPEC.read_text()), alternatives=False)
    assert (result.nodes, result.devices_per_node, result.fits) == (2, 8, True)
    assert result.cost_usd is None
    text = "\n".join(result.summary_lines())
    assert "A100-40GB" in text
    assert (
        "cost: unknown (the catalog prices cloud instances, not this cluster's nodes; set "
        "hardware.hourly_price_usd (per node-hour) to count it)"
    ) in text
    data = load_spec(SPEC.read_text()).model_dump(mode="json")
    data["hardware"]["hourly_price_usd"] = 20.0
    priced = plan(load_spec(data), alternatives=False)
    assert priced.cost_usd == pytest.approx(priced.hours * 20.0 * 2)


def test_the_form_offers_the_slurm_target_and_its_block():
    from nbtoolkit.notebook.form import SpecForm
    from tests.test_form import shown

    form = SpecForm({"task": "text-classification"})
    assert "slurm" in [value for _, value in form.fields["hardware.target"].options]
    assert "slurm.partition" not in shown(form)
    form.fields["hardware.target"].value = "slurm"
    assert {"slurm.partition", "slurm.time_limit", "slurm.account", "slurm.requeue"} <= set(shown(form))
    form.fields["slurm.partition"].value = "gpu"
    form.fields["slurm.time_limit"].value = "soon"
    assert form.spec is None and form.error.startswith("slurm.time_limit 'soon' is not a Slurm time limit")
    form.fields["slurm.time_limit"].value = "90"
    assert form.spec.slurm.partition == "gpu" and form.spec.slurm.time_limit == "90"
    form.fields["hardware.target"].value = "local"
    assert form.spec is not None and form.spec.slurm is None


def test_the_clusters_fixture_says_how_to_install_slurm_when_it_is_missing(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert missing_programs() == (
        "Slurm is not installed here (no sbatch on PATH): `make test-setup` installs it "
        "(apt-get install -y slurm-wlm munge)"
    )


def test_a_slurm_spec_rehearses_here_without_slurm():
    from nbtoolkit.rehearsal.rehearse import rehearsal

    rehearsed = rehearsal(load_spec(SPEC.read_text()))
    assert all(load_spec(spec).hardware.target == "local" and "slurm" not in spec for spec in rehearsed.specs)
    assert "the slurm run's nodes are rehearsed as nodes on loopback" in " ".join(rehearsed.notes)
