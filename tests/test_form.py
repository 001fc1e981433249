"""The configuration form driven as a user would: set values, read the spec and previews, press buttons."""

from __future__ import annotations

import html
import os
import re

import pytest
from IPython.core.error import UsageError

from nbtoolkit.notebook.browser_chart import JOB_MIME
from nbtoolkit.notebook.form import SpecForm
from nbtoolkit.notebook.form_sections import FIELDS
from nbtoolkit.notebook.preview import quiet_load
from nbtoolkit.spec import RunSpec, SpecError, load_spec
from nbtoolkit.tasks import TASK_NAMES
from tests.conftest import SCRIPTS
from tests.test_jobs import wait_for


def shown(form: SpecForm) -> list[str]:
    """The fields the form shows, in order (a section's children, headings and messages left out)."""
    by_widget = {id(widget): path for path, widget in form.fields.items()}
    return [by_widget[id(child)] for box in form.section_boxes for child in box.children if id(child) in by_widget]


def tab(form: SpecForm, title: str) -> str:
    return form.tabs.children[form.tabs.titles.index(title)].value


def test_an_empty_form_holds_the_spec_defaults():
    form = SpecForm()
    assert form.spec == RunSpec(task=TASK_NAMES[0]) and form.error is None
    assert "valid spec" in form.status.value and not form.launch_button.disabled
    assert "task: text-classification" in tab(form, "Spec (YAML)")
    assert "-m nbtoolkit.train --spec spec.json" in tab(form, "Command")
    assert "<code>spec.json</code>" in tab(form, "Files")
    assert "this machine can start it (local launcher)" in tab(form, "Checks")


def test_setting_values_changes_the_spec_and_every_preview():
    form = SpecForm({"task": "text-classification", "train": {"max_steps": 5}})
    before = {title: tab(form, title) for title in form.tabs.titles}
    form.fields["train.max_steps"].value = "40"
    form.fields["train.learning_rate"].value = 0.003
    form.fields["precision"].value = "bf16"
    assert form.spec.to_dict() == {
        "task": "text-classification",
        "precision": "bf16",
        "train": {"max_steps": 40, "learning_rate": 0.003},
    }
    assert "max_steps: 40" in tab(form, "Spec (YAML)") and "precision: bf16" in tab(form, "Spec (YAML)")
    assert "&quot;max_steps&quot;: 40" in tab(form, "Files")  # spec.json, as the job will get it
    form.fields["parallelism.strategy"].value = "deepspeed"
    form.fields["parallelism.zero_stage"].value = 2
    assert form.spec.parallelism.zero_stage == 2
    for title in ("Spec (YAML)", "Command", "Checks"):
        assert tab(form, title) != before[title]
    assert "deepspeed" in tab(form, "Command")  # its command, or why this branch has no such launcher


def test_only_the_fields_that_apply_are_shown():
    form = SpecForm()
    assert "parallelism.zero_stage" not in shown(form) and "sagemaker.role" not in shown(form)
    assert {"dataset.text_column", "dataset.label_column"} <= set(shown(form))
    assert "dataset.question_column" not in shown(form) and "dataset.name" not in shown(form)
    form.fields["parallelism.strategy"].value = "deepspeed"
    assert {"parallelism.zero_stage", "parallelism.offload_optimizer"} <= set(shown(form))
    assert "parallelism.nvme_path" not in shown(form)
    form.fields["parallelism.zero_stage"].value = 3
    form.fields["parallelism.offload_params"].value = "nvme"
    assert "parallelism.nvme_path" in shown(form)
    form.fields["task"].value = "question-answering"
    assert {"dataset.question_column", "dataset.context_column", "dataset.doc_stride"} <= set(shown(form))
    assert "dataset.label_column" not in shown(form)
    form.fields["dataset.source"].value = "hub"
    assert {"dataset.name", "dataset.config"} <= set(shown(form)) and "dataset.files.train" not in shown(form)
    form.fields["hardware.target"].value = "sagemaker"
    assert {"sagemaker.role", "hardware.instance_type"} <= set(shown(form))
    assert "sagemaker.max_wait" not in shown(form)
    form.fields["sagemaker.spot"].value = True
    assert "sagemaker.max_wait" in shown(form)
    form.fields["parallelism.strategy"].value = "smp"
    assert {"parallelism.tensor_parallel_degree", "parallelism.pipeline_parallel_degree"} <= set(shown(form))
    assert "parallelism.zero_stage" not in shown(form)


def test_a_hidden_field_leaves_the_spec():
    form = SpecForm({"task": "causal-lm", "parallelism": {"strategy": "deepspeed", "zero_stage": 2}})
    form.fields["parallelism.strategy"].value = "ddp"
    assert form.spec.parallelism.strategy == "ddp" and form.spec.parallelism.zero_stage == 0


def test_each_field_validates_as_you_type_with_the_specs_sentence():
    form = SpecForm({"task": "causal-lm"})
    form.fields["parallelism.strategy"].value = "deepspeed"
    form.fields["parallelism.zero_stage"].value = 1
    form.fields["parallelism.offload_params"].value = "cpu"
    with pytest.raises(SpecError) as expected:
        load_spec(form.spec_data())
    assert form.spec is None and form.error == str(expected.value)
    box = next(box for box in form.section_boxes if form.fields["parallelism.offload_params"] in box.children)
    at = list(box.children).index(form.fields["parallelism.offload_params"])
    assert box.children[at + 1] is form.field_error and "needs ZeRO stage 3" in form.field_error.value
    assert form.launch_button.disabled and form.export_button.disabled
    assert "needs ZeRO stage 3" in tab(form, "Command")
    form.fields["train.max_steps"].value = "ten"  # typed, not yet a number: the first problem is still shown
    form.fields["parallelism.zero_stage"].value = 3
    assert "train.max_steps: 'ten' is not valid" in form.error
    box = next(box for box in form.section_boxes if form.fields["train.max_steps"] in box.children)
    assert form.field_error in box.children
    form.fields["train.max_steps"].value = "10"
    assert form.spec is not None and form.field_error.value == "" and not form.launch_button.disabled
    assert all(form.field_error not in box.children for box in form.section_boxes)


def test_the_budget_is_a_hyperparameter_field_and_needs_a_price():
    form = SpecForm({"task": "causal-lm"})
    form.fields["train.budget_usd"].value = "20"
    assert form.spec is None and form.error.startswith("train.budget_usd needs a price to count against")
    form.fields["hardware.accelerator"].value = "cuda"
    form.fields["hardware.instance_type"].value = "g5.2xlarge"
    assert form.spec is not None and form.spec.train.budget_usd == 20


def test_a_value_no_dropdown_offers_is_refused_with_the_specs_sentence(shell):
    with pytest.raises(SpecError, match="^precision: 'fp8' is not valid; expected 'fp32', 'bf16' or 'fp16'$"):
        SpecForm({"task": "causal-lm", "precision": "fp8"})
    with pytest.raises(UsageError, match="precision: 'fp8' is not valid"):
        shell.run_line_magic("finetune", "--form --task causal-lm --set precision=fp8")


def test_a_prefilled_spec_keeps_what_the_form_does_not_show(tmp_path):
    spec = load_spec(
        {
            "task": "summarization",
            "extra": {"lr_scheduler_type": "cosine"},
            "script": {"path": "train.py", "args": ["--x", "1"]},
            "resume": "latest",
            "dataset": {"files": {"train": "a.jsonl", "test": "t.jsonl"}, "summary_column": "sum"},
        }
    )
    form = SpecForm(spec)
    assert form.fields["dataset.source"].value == "files" and form.fields["dataset.files.train"].value == "a.jsonl"
    assert form.spec == load_spec(
        {**spec.to_dict(), "dataset": {"files": {"train": "a.jsonl"}, "summary_column": "sum"}}
    )
    (tmp_path / "spec.yaml").write_text(spec.to_yaml())
    assert SpecForm(str(tmp_path / "spec.yaml")).spec == form.spec


@pytest.mark.parametrize(
    "line",
    [
        "--task text-classification --steps 40 --lr 0.003 --logging-steps 5 --name quick",
        "--task summarization --zero 3 --offload all --bf16 --nproc 2 --dataset data/train.jsonl --eval-file data/v.jsonl",
        (
            "--task question-answering --target sagemaker --instance-type ml.p4d.24xlarge --strategy smddp --nodes 2 "
            "--role arn:aws:iam::111122223333:role/sm --spot --set sagemaker.max_wait=90000 --dataset squad "
            "--set sagemaker.image_uri=111122223333.dkr.ecr.us-east-1.amazonaws.com/hf-smddp:4.46"
        ),
        "--task causal-lm --compile --set dataset.pad_to_max_length=true --launcher torchrun --nproc 2 --strategy ddp",
        "--task causal-lm --lora 16 --set adapter.dropout=0.1 --set report_to=[tensorboard,mlflow]",
        "--task causal-lm --instance-type g5.2xlarge --accelerator cuda --budget-usd 20",
        # the chat family: the form shows their blocks (format, preference, reward) and gives them back whole
        "--task chat --lora 8 --nproc 2 --strategy ddp --set dataset.format=messages --set dataset.packing=true",
        "--task preference --nproc 2 --zero 3 --set preference.method=kto --set preference.beta=0.2",
        (
            "--task grpo --lora 8 --set reward.functions=[nbtoolkit.rewards:correct_answer] "
            "--set reward.num_generations=4 --set reward.max_completion_length=16"
        ),
    ],
)
def test_the_form_and_finetune_produce_the_same_spec(shell, line):
    from_flags = shell.run_line_magic("finetune", f"--dry-run {line}").spec
    form = shell.run_line_magic("finetune", f"--form {line}")
    assert form.spec == from_flags
    cell = form.copy_cell()
    assert cell == shell.rl_next_input and form.cell.value == cell and form.cell.layout.display == ""
    magic, body = cell.split("\n", 1)
    assert magic == "%%finetune"
    assert shell.run_cell_magic("finetune", "--dry-run", body).spec == from_flags


def test_export_writes_a_runnable_launch(tmp_path):
    form = SpecForm({"task": "text-classification", "train": {"max_steps": 3}})
    form.export_dir.value = str(tmp_path / "out")
    assert form.export() == tmp_path / "out"
    assert os.access(tmp_path / "out" / "run.sh", os.X_OK)
    assert "-m nbtoolkit.train --spec spec.json" in (tmp_path / "out" / "run.sh").read_text()
    assert quiet_load(tmp_path / "out" / "spec.json") == form.spec
    assert "wrote" in form.status.value


def test_launch_starts_a_real_job_and_stop_ends_it(store):
    form = SpecForm({"task": "text-classification", "train": {"max_steps": 4, "logging_steps": 2}})
    assert form.stop_button.disabled
    form.launch_button.click()  # a job's display is its live chart: the display needs issue 5's charts
    job = form.job
    assert job is not None and store.get(job.id).name == form.spec.display_name
    assert f"job {job.id} started" in form.status.value and not form.stop_button.disabled
    assert job.wait(timeout=180) == "succeeded", job.logs()
    assert [record["step"] for record in job.records() if record["kind"] == "train"] == [2, 4]
    assert job.spec == form.spec

    sleeper = SpecForm({"task": "text-classification", "script": {"path": str(SCRIPTS / "sleepy.py")}})
    sleeper.launch_button.click()
    wait_for(lambda: "ready pids" in sleeper.job.logs())
    sleeper.stop_button.click()
    assert sleeper.job.status == "stopped" and f"job {sleeper.job.id} stopped" in sleeper.status.value


def test_the_form_covers_every_block_of_the_spec():
    blocks = {path.split(".")[0] for path in FIELDS}
    assert {
        "name",
        "task",
        "model",
        "dataset",
        "hardware",
        "parallelism",
        "precision",
        "compile",
        "launcher",
        "train",
        "sagemaker",
        "slurm",
        "adapter",
        "report_to",
        "preference",
        "reward",
    } <= blocks


def test_a_tasks_own_block_is_a_section_shown_while_that_task_is_chosen():
    """GRPO's sampling and a preference run's method are set in the form; another task's spec carries neither."""
    form = SpecForm({"task": "grpo"})
    assert {"reward.num_generations", "reward.temperature", "reward.beta"} <= set(shown(form))
    assert "preference.method" not in shown(form)
    form.fields["reward.num_generations"].value = 8
    form.fields["reward.beta"].value = 0.04
    assert (form.spec.reward.num_generations, form.spec.reward.beta) == (8, 0.04)
    form.fields["reward.num_generations"].value = 1
    assert form.spec is None and "reward.num_generations" in form.error  # the spec's own sentence, under the field
    form.fields["task"].value = "preference"
    assert "reward.num_generations" not in shown(form) and form.spec.reward is None
    form.fields["preference.method"].value = "kto"
    assert form.spec.preference.method == "kto" and "method: kto" in tab(form, "Spec (YAML)")
    form.fields["task"].value = "chat"
    assert form.spec.preference is None and form.spec.reward is None


def test_grpo_rewards_are_entered_one_per_line_and_a_bad_one_gets_the_specs_sentence_under_its_field():
    form = SpecForm({"task": "grpo"})
    assert {"reward.functions", "reward.models", "reward.weights"} <= set(shown(form))
    form.fields["reward.functions"].value = "nbtoolkit.rewards:correct_answer\n nbtoolkit.rewards:number_reply \n"
    form.fields["reward.models"].value = "job:3f2a9c"
    form.fields["reward.weights"].value = "1, 0.5, 2"
    assert form.spec.reward.functions == ["nbtoolkit.rewards:correct_answer", "nbtoolkit.rewards:number_reply"]
    assert (form.spec.reward.models, form.spec.reward.weights) == (["job:3f2a9c"], [1.0, 0.5, 2.0])
    assert "reward.models 'job:3f2a9c': no job has that id or name" in html.unescape(tab(form, "Command"))
    # a model's folder may hold a comma or a space: one per line; weights split on lines, spaces, ';' and ', '
    form.fields["reward.models"].value = "/tmp/my models/rm,v2\njob:3f2a9c"
    form.fields["reward.weights"].value = "1 0.5;2\n3"
    assert form.spec.reward.models == ["/tmp/my models/rm,v2", "job:3f2a9c"]
    assert form.spec.reward.weights == [1.0, 0.5, 2.0, 3.0]
    form.fields["reward.weights"].value = "1\n0,5\n2\n3"  # a decimal comma is refused, never read as 0 and 5
    assert form.spec is None and form.error == (
        "reward.weights '0,5' has a comma inside a number, which could be a decimal comma or two weights; write "
        "decimals with a point (0.5) and separate weights by new lines, spaces or semicolons"
    )
    assert "one per line" in form.fields["reward.models"].placeholder  # the rule, where the user types
    assert "decimals with a point" in form.fields["reward.weights"].placeholder
    form.fields["reward.models"].value = "job:3f2a9c"
    form.fields["reward.weights"].value = form.fields["reward.models"].value = ""
    form.fields["reward.functions"].value = "missing_rewards.py:short"  # shipped as the launch renders: not there
    assert "missing_rewards.py does not exist" in tab(form, "Command")
    form.fields["reward.functions"].value = "nbtoolkit.rewards"
    sentence = (
        "reward.functions 'nbtoolkit.rewards' names no function; write module:function or path/to/file.py:function"
    )
    assert form.spec is None and form.error == sentence
    assert html.unescape(form.field_error.value).endswith(f">{sentence}</span>")  # shown right under the field
    form.fields["reward.functions"].value = "nbtoolkit.rewards:correct_answer"
    form.fields["reward.weights"].value = "1, heavy"
    assert form.spec is None and form.error.startswith("reward.weights.1: 'heavy' is not valid")
    assert "fix Reward weights: reward.weights.1" in html.unescape(form.status.value)


def test_a_kernel_function_shipped_in_a_prefilled_spec_is_shown_by_name_and_kept_whole():
    shipped = {"name": "short", "source": "def short(completions, **kwargs):\n    return [0.0 for _ in completions]\n"}
    form = SpecForm({"task": "grpo", "reward": {"functions": [shipped, "nbtoolkit.rewards:number_reply"]}})
    assert form.fields["reward.functions"].value == "short\nnbtoolkit.rewards:number_reply"
    assert form.spec.reward.functions[0].source == shipped["source"]


def test_the_adapter_section_adds_and_removes_the_adapter_block():
    form = SpecForm({"task": "summarization"})
    assert "adapter.r" not in shown(form) and form.spec.adapter is None
    form.fields["adapter.choice"].value = "lora"
    assert {"adapter.r", "adapter.alpha", "adapter.dropout"} <= set(shown(form))
    form.fields["adapter.r"].value = 4
    assert form.spec.adapter.model_dump() == {
        "type": "lora",
        "r": 4,
        "alpha": 16,
        "dropout": 0.05,
        "target_modules": None,
    }
    form.fields["adapter.choice"].value = "qlora"  # on the default cpu accelerator: the spec's sentence
    assert form.spec is None and form.error.startswith("adapter.type 'qlora' loads the base model in 4 bits")
    form.fields["adapter.choice"].value = "none"
    assert form.spec is not None and form.spec.adapter is None and "adapter.r" not in shown(form)


def test_launch_shows_the_jobs_chart_in_the_form_and_its_final_image_once_it_ends(store):
    form = SpecForm({"task": "text-classification", "script": {"path": str(SCRIPTS / "sleepy.py")}})
    job = form.launch()
    try:  # the browser draws it from the job's reference; the final image follows the job's end
        wait_for(
            lambda: any(
                output["data"].get(JOB_MIME) == {"job_ids": [job.id], "options": {"log_scale": False, "smoothing": 0.6}}
                for output in form.output.outputs
            ),
            timeout=60,
        )
    finally:
        job.stop()
    wait_for(lambda: any("image/png" in output["data"] for output in form.output.outputs), timeout=60)


def test_picking_an_instance_type_brings_its_devices():
    form = SpecForm(
        {
            "task": "causal-lm",
            "hardware": {"target": "sagemaker"},
            "sagemaker": {"role": "arn:aws:iam::111122223333:role/sm"},
        }
    )
    form.fields["hardware.instance_type"].value = "ml.p4d.24xlarge"
    assert (form.fields["hardware.accelerator"].value, form.fields["hardware.devices"].value) == ("cuda", 8)
    assert form.spec is not None and form.spec.world_size == 8


def test_report_to_is_chosen_in_the_form_and_none_by_default():
    form = SpecForm({"task": "causal-lm"})
    assert form.spec.report_to == [] and "report_to" not in form.spec.to_dict()
    form.fields["report_to"].value = ("tensorboard", "mlflow")
    assert form.spec.report_to == ["tensorboard", "mlflow"]


def test_preview_data_shows_the_report_of_the_forms_spec():
    form = SpecForm({"task": "summarization"})
    form.fields["dataset.max_target_length"].value = 20
    report = form.preview_data()
    shown_html = form.data_view.value

    assert "<b>320</b> summarization examples" in shown_html
    assert shown_html.count("<tr><td>Carrow Bay Athletic beat") == 1  # the first row, in the rows table
    histograms = re.split(r"<div class='nbtoolkit-data-histogram' data-side='\w+'>", shown_html)[1:]
    assert len(histograms) == 2  # source and target
    for side in histograms:
        counts = [int(count) for count in re.findall(r">(\d+)(?: &larr; cut)?</td></tr>", side)]
        assert sum(counts) == 320  # every example in one bar
    target = histograms[1]
    assert target.count("&larr; cut") == 1
    assert f"<code>dataset.max_target_length</code> 20: <b>{report.lengths[1].cut_share:.1%}</b>" in target
    assert f"suggested <code>dataset.max_target_length</code>: <b>{report.lengths[1].suggested}</b>" in target


def test_preview_data_says_a_wrong_mapping_in_one_sentence():
    form = SpecForm({"task": "text-classification"})
    form.fields["dataset.label_column"].value = "emotion"
    assert form.spec is not None and form.preview_data() is None
    assert (
        "dataset.label_column &#x27;emotion&#x27; is not a column of the data; its columns are text, label"
        in form.data_view.value
    )
    assert not form.data_button.disabled


def test_rehearse_here_runs_the_forms_spec_in_the_background_and_shows_the_report(store):
    form = SpecForm({"task": "text-classification", "hardware": {"devices": 2}})
    thread = form.rehearse()
    assert form.rehearse_button.disabled and "rehearsing" in form.rehearsal_view.value
    assert form.rehearse() is None  # one rehearsal at a time
    thread.join(timeout=300)
    assert not thread.is_alive() and not form.rehearse_button.disabled
    shown_html = form.rehearsal_view.value
    assert "rehearsal of 2 rank(s) as 2 on this machine" in shown_html and ": passed in " in shown_html
    assert "stage train: passed" in shown_html and "the planner predicts" in shown_html
    assert {job.status for job in store.list()} == {"succeeded"}


def test_rehearse_here_says_why_a_spec_cannot_be_rehearsed(tmp_path):
    (tmp_path / "train.py").write_text("print('hi')\n")
    form = SpecForm({"task": "text-classification", "script": {"path": str(tmp_path / "train.py")}})
    form.rehearse().join(timeout=60)
    assert "a spec with script: cannot be rehearsed yet" in form.rehearsal_view.value
    assert "Error" not in form.rehearsal_view.value and not form.rehearse_button.disabled
