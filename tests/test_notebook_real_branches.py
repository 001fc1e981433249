"""Each example notebook's real branch, executed with its one marked cell switched to real mode, launches only
reviewed goldens (tests/golden/, rendered from notebooks/specs/) and runs to its end. Nothing reaches AWS or a
GPU: SageMaker jobs go to the local stand-in (nbtoolkit.backends.sagemaker.standin, requests only), Neuron's
tools are the fakes in tests/fakes/bin, and a launch for hardware this machine lacks is a dry run (its job runs
a no-op in place of each stage). A real cell that fails, or a launch that is not a golden, fails the test."""

from __future__ import annotations

import json
import os
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell

from nbtoolkit.spec import load_spec
from tests.notebook_runner import execute
from tests.real_launches import GOLDEN, ROOT, golden_files

pytestmark = pytest.mark.heavy  # a kernel per notebook: run first under pytest -n (tests/conftest.py)

NOTEBOOKS = ROOT / "notebooks"
FAKE_TOOLS = ROOT / "tests" / "fakes" / "bin"
#: what the reviewed specs hold where a user puts their own AWS account's values (the notebooks' marked cell)
REVIEWED_USER_FIELDS = {
    "role": "arn:aws:iam::111122223333:role/SageMakerExecutionRole",
    "region": "us-east-1",
    "bucket": None,
}

#: runs in the kernel right after the marked cell: records every launch, then sends it where it can go here
HARNESS = """
import dataclasses as _dc, json as _json, sys as _sys
import nbtoolkit.api as _api
from nbtoolkit.launching.launch import Stage as _Stage
from nbtoolkit.spec import load_spec as _load_spec

_STANDIN = None
if {standin!r}:
    from pathlib import Path as _Path
    import os as _os, tempfile as _tempfile
    from nbtoolkit.backends.sagemaker import standin as _local_aws
    _STANDIN = _local_aws.SageMakerStandIn(_Path(_tempfile.mkdtemp()) / "standin")
    _STANDIN.start()
    _STANDIN.run_containers = {dry_model!r} is not None  # without a dry model: requests only, nothing trains
    if {dry_model!r} is not None:  # each job logs a few records and leaves this tiny model as its model data
        _STANDIN.dry_program = [_sys.executable, "-c", _DRY_CONTAINER, {dry_model!r}]
        import nbtoolkit.inputs.data_preview as _data_preview  # the real data is on the Hub, which no test reaches
        _data_preview.preview_data = lambda spec, rows=0: f"(the data preview of {{spec.dataset.name}} reads the Hub)"
    _os.environ.update(_STANDIN.env)


def _recorded_launch(spec, **options):
    from nbtoolkit.lineage.chains import in_default_store
    from nbtoolkit.rewards import with_rewards

    given = _load_spec(spec)
    spec = with_rewards(given, options["rewards"]) if options.get("rewards") else given
    spec = in_default_store(spec, fetching=False).spec  # `model: job:ID` as the job's machines read it
    with open({record!r}, "a") as out:
        out.write(spec.model_dump_json() + "\\n")
    if _STANDIN is not None and spec.hardware.target == "sagemaker":
        return _real_launch(given, **options)
    _api.check_fit(spec, force=options.get("force", False))
    launch = _api.dispatch.render(spec)
    noop = [_sys.executable, "-c", _DRY_RUN]
    dry = _dc.replace(launch, stages=[_dc.replace(stage, argv=noop, env={{}}) for stage in launch.stages])
    record = _api.job_control.submit(dry, name=spec.display_name, task=spec.task)
    return _api.Job(record.id)


_real_launch = _api.launch
_api.launch = _recorded_launch
import nbtoolkit.compiled as _compiled
_compiled.launch = _recorded_launch  # compare_compiled's two runs
"""

#: a dry run's stage: a Trainer's log of 20 steps, which a remote job's follower parses into metrics
DRY_RUN = (
    "import time\n"
    "print('[dry run] stands in for the rendered stage', flush=True)\n"
    "for step in range(1, 21):\n"
    "    print(f'[nbtoolkit] step {step}/20', flush=True)\n"
    "    print({'loss': str(4 - step / 10), 'learning_rate': '2e-05', 'epoch': str(step / 20)}, flush=True)\n"
    "    time.sleep(0.05)\n"
    "print({'train_runtime': '1.0', 'train_samples_per_second': '100.0', 'train_steps_per_second': '20.0', "
    "'train_loss': '3.0', 'epoch': '1.0'}, flush=True)\n"
)


#: a SageMaker job's container in a dry run: a Trainer's (and TRL's) log of a few steps, then a tiny model left in
#: /opt/ml/model, which the stand-in uploads as the job's model data
DRY_CONTAINER = (
    "import os, shutil, sys\n"
    "for step in range(1, 6):\n"
    "    print(f'[nbtoolkit] step {step}/5', flush=True)\n"
    "    print({'loss': str(1 - step / 10), 'learning_rate': '1e-05', 'epoch': str(step / 5), 'reward': '0.5', "
    "'reward_std': '0.1', 'rewards/brevity/mean': '0.5', 'completions/mean_length': '12.0', 'rewards/chosen': '0.1', "
    "'rewards/rejected': '-0.1', 'rewards/margins': '0.2', 'rewards/accuracies': '0.75'}, flush=True)\n"
    "shutil.copytree(sys.argv[1], os.environ['SM_MODEL_DIR'], dirs_exist_ok=True)\n"
)


def real_branch(
    name: str, marked: dict[str, str], tmp_path: Path, standin: bool = False, dry_model: Path | None = None
) -> list:
    """Execute the notebook with the marked cell's settings replaced; the specs it launched. With `dry_model`, the
    stand-in's jobs complete, each leaving that model as its model data."""
    notebook = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    index = next(
        i
        for i, cell in enumerate(notebook.cells)
        if cell.cell_type == "code" and any(key in cell.source for key in marked)
    )
    source = notebook.cells[index].source
    for old, new in marked.items():
        assert old in source, f"{name}: the marked cell no longer says {old!r}"
        source = source.replace(old, new)
    notebook.cells[index].source = source
    record = tmp_path / "launched.jsonl"
    harness = f"_DRY_RUN = {DRY_RUN!r}\n_DRY_CONTAINER = {DRY_CONTAINER!r}\n" + HARNESS.format(
        record=str(record), standin=standin, dry_model=str(dry_model) if dry_model else None
    )
    notebook.cells.insert(index + 1, new_code_cell(harness))
    if standin:
        notebook.cells.append(new_code_cell("_STANDIN.close()"))
    execute(notebook, NOTEBOOKS, timeout=600)  # raises on the first cell that fails
    return [load_spec(json.loads(line)) for line in record.read_text().splitlines()] if record.exists() else []


def as_reviewed(spec):
    """The spec with what a user fills in the marked cell (role, region, bucket) as the reviewed specs hold it."""
    if spec.sagemaker is None:
        return spec
    return spec.model_copy(update={"sagemaker": spec.sagemaker.model_copy(update=REVIEWED_USER_FIELDS)})


def goldens() -> dict[str, dict[str, str]]:
    return {
        folder.name: {
            path.relative_to(folder).as_posix(): path.read_text() for path in folder.rglob("*") if path.is_file()
        }
        for folder in GOLDEN.iterdir()
    }


def assert_only_goldens(launched: list, expected: list[str]) -> None:
    kept = goldens()
    matched = []
    for spec in launched:
        rendered = golden_files(as_reviewed(spec))
        found = [name for name, files in kept.items() if files == rendered]
        assert found, f"{spec.display_name} is launched for real, and its launch is none of the goldens"
        matched += found
    assert matched == expected


@pytest.fixture
def neuron_tools(monkeypatch):
    monkeypatch.setenv("PATH", f"{FAKE_TOOLS}{os.pathsep}{os.environ['PATH']}")


@pytest.mark.parametrize("model", ["t5-small", "t5-large"])
def test_t5_real_branch_launches_its_golden(model, home, tmp_path, neuron_tools):
    small = 'REAL_SPEC = "specs/t5-small-trainium.yaml"'
    marked = {"SMOKE = True": "SMOKE = False", small: small.replace("t5-small", model)}
    launched = real_branch("t5-summarization-trainium", marked, tmp_path)
    assert_only_goldens(launched, [f"{model}-trainium"])


def test_bert_emotion_real_branch_launches_its_golden(home, tmp_path, neuron_tools):
    launched = real_branch("bert-emotion-trainium", {"SMOKE = True": "SMOKE = False"}, tmp_path)
    assert_only_goldens(launched, ["bert-emotion-trainium"])


def test_flan_t5_real_branch_launches_its_golden(home, tmp_path):
    launched = real_branch("flan-t5-deepspeed-plan", {"REAL = False": "REAL = True"}, tmp_path)
    assert_only_goldens(launched, ["flan-t5-xxl"])


def test_bert_qa_real_branch_launches_only_the_tutorials_data_parallel_run(home, tmp_path):
    """Before: three jobs on 2 x ml.p4d.24xlarge, none of them the reviewed spec, then a spot cell refused by the
    fit check with the jobs left billing. The role and bucket a user fills in reach the launch."""
    from nbtoolkit.backends.sagemaker import standin

    mine = {
        "LIVE = False": "LIVE = True",
        'ROLE = "arn:aws:iam::111122223333:role/SageMakerExecutionRole"': f"ROLE = {standin.ROLE!r}",
        "BUCKET = None": f"BUCKET = {standin.BUCKET!r}",
    }
    launched = real_branch("bert-qa-sagemaker", mine, tmp_path, standin=True)
    assert [(spec.sagemaker.role, spec.sagemaker.bucket) for spec in launched] == [(standin.ROLE, standin.BUCKET)]
    assert_only_goldens(launched, ["bert-qa-sagemaker"])


def test_gpt2_real_branch_launches_the_two_compared_goldens_with_the_marked_cells_role(home, tmp_path):
    """Before: the native run was not the reviewed spec (pretrained, fp16, 3 epochs), the compiled one had no
    golden, and the IAM role had to be edited inside the YAML file."""
    role = "arn:aws:iam::444455556666:role/mine"
    mine = {"SMOKE = True": "SMOKE = False", '"arn:aws:iam::111122223333:role/SageMakerExecutionRole"': repr(role)}
    launched = real_branch("gpt2-compiled-vs-native", mine, tmp_path)
    assert [spec.sagemaker.role for spec in launched] == [role, role]
    assert_only_goldens(launched, ["gpt2-wikitext-sagemaker-eager", "gpt2-wikitext-sagemaker-torch.compile"])


@pytest.fixture(scope="module")
def tiny_chat_model(tmp_path_factory) -> Path:
    """A tiny chat model (random weights, the bundled chat tokenizer and template) saved as a model folder."""
    import subprocess
    import sys

    folder = tmp_path_factory.mktemp("tiny-chat-model")
    build = (
        "import sys\n"
        "from transformers import AutoModelForCausalLM\n"
        "from nbtoolkit.spec import load_spec\n"
        "from nbtoolkit.train.chat_template import chat_tokenizer\n"
        "from nbtoolkit.train.models import tiny_config\n"
        "spec = load_spec({'task': 'chat'})\n"
        "tokenizer = chat_tokenizer(spec)\n"
        "AutoModelForCausalLM.from_config(tiny_config(spec.model_name, tokenizer)).save_pretrained(sys.argv[1])\n"
        "tokenizer.save_pretrained(sys.argv[1])\n"
    )
    subprocess.run([sys.executable, "-c", build, str(folder)], check=True)
    return folder


def test_chat_real_branch_chains_sft_dpo_grpo_on_sagemaker_and_chats_with_the_last_model(
    home, tmp_path, tiny_chat_model
):
    """Before: SFT billed, then `merge` found no model here and DPO refused a local path. Each step now starts
    from the one before by `model: job:ID`: DPO's and GRPO's goldens read the earlier job's model data as their
    `model` input channel, and Try it and predict answer from the GRPO job's model, downloaded. The stand-in runs
    each job dry (a few log records, a tiny model as its model data)."""
    from nbtoolkit.backends.sagemaker import standin

    mine = {
        "SMOKE = True": "SMOKE = False",
        '"arn:aws:iam::111122223333:role/SageMakerExecutionRole"': repr(standin.ROLE),
        "BUCKET = None": f"BUCKET = {standin.BUCKET!r}",  # the SDK's default bucket asks real STS for the account
        # lm-eval's own tasks download their data: the bundled one, a few questions
        '{"tasks": ["arc_easy", "hellaswag"], "limit": 500}': '{"tasks": ["nbtoolkit_tiny"], "limit": 4}',
    }
    launched = real_branch("chat-sft-dpo-grpo", mine, tmp_path, standin=True, dry_model=tiny_chat_model)
    assert_only_goldens(launched, ["chat-sft-qwen", "chat-dpo-qwen", "chat-grpo-qwen"])
    _, dpo, grpo = launched
    assert dpo.model.startswith("s3://") and "/chat-sft-qwen/chat-sft-qwen-" in dpo.model
    assert grpo.model.startswith("s3://") and "/chat-dpo-qwen/chat-dpo-qwen-" in grpo.model
    # the DPO job, measured against the SFT job's model: both downloaded from their model data and evaluated here
    (compared,) = home.glob("jobs/*/eval/harness.json")
    results = json.loads(compared.read_text())
    assert {row["metric"] for row in results["rows"]} == {"acc", "acc_norm"} and results["missing"] is None
    assert all(row["base"] is not None and row["tuned"] is not None for row in results["rows"])
    sft_folder = next(arg for arg in results["commands"]["base"] if arg.startswith("pretrained="))
    assert sft_folder.endswith("/output/model,tokenizer=" + str(compared.parent.parent / "output" / "model"))
    assert "--apply_chat_template" in results["commands"]["tuned"]
