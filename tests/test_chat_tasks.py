"""Chat, preference and grpo on TRL's trainers: real jobs of the bundled tiny chat model, all started at once
(chat from the form, grpo from a %%finetune cell, the others from nbtoolkit.launch).

chat on 1 rank (and the template parity: trained == saved == predicted, token for token), grpo on 1 rank
(its reward over the arithmetic prompts rises; one reward named by module, one shipped from here), DPO on 2 ranks (torchrun, with a reference copy), chat
with LoRA on 2 ranks, and DPO under DeepSpeed ZeRO-3 on 2 CPU ranks.
"""

from __future__ import annotations

import re
import warnings

import pytest
import yaml
from IPython.core.interactiveshell import InteractiveShell

from nbtoolkit.api import Job, launch
from nbtoolkit.backends import LaunchError
from nbtoolkit.notebook.form import SpecForm
from nbtoolkit.runner import JobStore
from nbtoolkit.trained_model.export import ExportWarning
from tests.test_chat_specs import EOT_OUTSIDE

pytestmark = pytest.mark.heavy  # real multi-process training: run first under pytest -n (tests/conftest.py)

STEPS = {"max_steps": 4, "batch_size": 4, "logging_steps": 1, "learning_rate": 1.0e-3}
TWO_RANKS = {"hardware": {"devices": 2}, "parallelism": {"strategy": "ddp"}}
RUNS = {
    "chat": {"task": "chat", "train": {**STEPS, "max_steps": 6, "learning_rate": 3.0e-3}},
    # 16 completions a step (4 prompts x 4); a high rate moves a random model's first tokens within 10 steps
    "grpo": {
        "task": "grpo",
        "dataset": {"eval_split": None},
        "reward": {"functions": ["nbtoolkit.rewards:correct_answer"], "num_generations": 4, "max_completion_length": 8},
        "train": {"max_steps": 10, "batch_size": 16, "logging_steps": 1, "learning_rate": 5.0e-2},
    },
    "dpo-ddp": {"task": "preference", **TWO_RANKS, "train": STEPS},
    "chat-lora-ddp": {"task": "chat", "adapter": {"r": 8}, **TWO_RANKS, "train": {**STEPS, "learning_rate": 1.0e-2}},
    "dpo-lora": {
        "task": "preference",
        "adapter": {"r": 8},
        "dataset": {"eval_split": None},
        "train": {**STEPS, "max_steps": 2, "learning_rate": 1.0e-2},
    },
    "grpo-lora-ddp": {
        "task": "grpo",
        "adapter": {"r": 8},
        **TWO_RANKS,
        "dataset": {"eval_split": None},
        "reward": {"functions": ["nbtoolkit.rewards:correct_answer"], "num_generations": 4, "max_completion_length": 8},
        "train": {"max_steps": 2, "batch_size": 8, "logging_steps": 1, "learning_rate": 1.0e-2},
    },
    # a template that closes the assistant's turn outside its generation markers: <|im_end|> never carries loss
    "chat-eot-masked": {
        "task": "chat",
        "dataset": {"chat_template": EOT_OUTSIDE, "eval_split": None},
        "train": {**STEPS, "max_steps": 1},
    },
    "dpo-zero3": {
        "task": "preference",
        "hardware": {"devices": 2},
        "parallelism": {"strategy": "deepspeed", "zero_stage": 3},
        "dataset": {"eval_split": None},
        "train": STEPS,
    },
}


DIGITS = "0123456789"


def digit_share(completions, **kwargs):
    """A reward defined here, not in an importable place the job could reach: it travels as its source."""
    texts = [completion[0]["content"].strip() for completion in completions]
    return [sum(char in DIGITS for char in text) / max(len(text), 1) for text in texts]


def from_the_form(spec: dict) -> Job:
    form = SpecForm(spec)
    assert form.launch() is not None, form.status.value
    return form.job


def from_a_finetune_cell(spec: dict) -> Job:
    """A `%%finetune` cell in a real IPython shell whose reward, `digit_share`, is defined in the kernel."""
    shell = InteractiveShell.instance()
    shell.extension_manager.load_extension("nbtoolkit")
    shell.user_ns["digit_share"] = digit_share
    cell = {**spec, "reward": {**spec["reward"], "functions": [*spec["reward"]["functions"], "digit_share"]}}
    return shell.run_cell_magic("finetune", "", yaml.safe_dump(cell))


@pytest.fixture(scope="module")
def jobs(tmp_path_factory) -> dict[str, Job]:
    """Every run at once: chat from the form, grpo from a %%finetune cell, the rest by nbtoolkit.launch."""
    home = tmp_path_factory.mktemp("nbhome")
    store = JobStore(home)
    starts = {"chat": from_the_form, "grpo": from_a_finetune_cell}
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("OMP_NUM_THREADS", "1")
        patch.setenv("NBTOOLKIT_HOME", str(home))  # where the form and the magic launch
        started = {name: starts.get(name, lambda spec: launch(spec, store=store))(spec) for name, spec in RUNS.items()}
    for job in started.values():
        job.wait(timeout=400)
    return started


def train_records(job: Job) -> list[dict]:
    assert job.record.status == "succeeded", job.logs(tail=40)
    return [record for record in job.records() if record["kind"] == "train"]


def test_chat_trains_on_the_assistant_turns(jobs):
    records = train_records(jobs["chat"])
    losses = [record["loss"] for record in records]
    assert len(losses) == 6 and losses[-1] < losses[0] - 0.2, losses
    assert "dataset format: messages (detected)" in jobs["chat"].logs()


def test_template_parity_trained_saved_predicted(jobs):
    """The template the trainer rendered with, the one saved beside the model, and the one predict renders
    with (from the Try-it chat, with its history) are the same, token for token; the saved generation config
    stops at the template's end of turn."""
    from transformers import AutoTokenizer, GenerationConfig

    from nbtoolkit.inputs.chat_formats import CHATML
    from nbtoolkit.notebook.try_it import TryIt
    from nbtoolkit.train.chat_template import chat_tokenizer

    job = jobs["chat"]
    model_dir = job.dir / "output" / "model"
    trained, saved = chat_tokenizer(job.spec), AutoTokenizer.from_pretrained(model_dir)
    assert trained.chat_template == saved.chat_template == CHATML
    conversation = [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "What is 2 + 3?"},
        {"role": "assistant", "content": "2 + 3 = 5. The answer is 5."},
        {"role": "user", "content": "What is 7 - 4?"},
    ]
    as_trained = trained.apply_chat_template(conversation, add_generation_prompt=True, return_dict=True)["input_ids"]
    as_saved = saved.apply_chat_template(conversation, add_generation_prompt=True, return_dict=True)["input_ids"]
    assert list(as_trained) == list(as_saved)
    # predict as the Try-it chat calls it: the history so far and the new message
    chat = TryIt(job)
    chat.history, chat.text.value = conversation[:-1], conversation[-1]["content"]
    answer = chat.ask()
    assert saved(answer["prompt"], add_special_tokens=False)["input_ids"] == list(as_trained)
    assert [m["role"] for m in chat.history] == ["system", "user", "assistant", "user", "assistant"]
    assert chat.history[-1]["content"] == answer["reply"] and chat.text.value == ""
    assert chat.answer.value.count("<b>you:</b>") == 2 and chat.answer.value.count("<b>model:</b>") == 2
    chat.restart()
    assert chat.history == [] and chat.answer.value == ""
    assert GenerationConfig.from_pretrained(model_dir).eos_token_id == saved.convert_tokens_to_ids("<|im_end|>")


def test_grpo_reward_rises_on_the_arithmetic_prompts(jobs):
    records = train_records(jobs["grpo"])
    rewards = [record["reward"] for record in records]
    assert len(rewards) == 10
    assert sum(rewards[-3:]) / 3 > sum(rewards[:3]) / 3 + 0.1, rewards
    for name in ("correct_answer", "digit_share"):  # each function's own series reaches metrics.jsonl
        assert all(f"rewards/{name}/mean" in record for record in records)
    assert all(record["completions/mean_length"] <= 8 for record in records)


@pytest.mark.parametrize("name", ["dpo-ddp", "dpo-zero3"])
def test_dpo_on_two_ranks_logs_its_rewards(jobs, name):
    records = train_records(jobs[name])
    assert len(records) == 4
    for key in ("rewards/chosen", "rewards/rejected", "rewards/margins", "rewards/accuracies"):
        assert all(key in record for record in records), key
    assert records[0]["loss"] == pytest.approx(0.6931, abs=1e-3)  # log 2: the policy starts as its reference
    assert records[-1]["rewards/margins"] > 0
    assert "2 process(es)" in jobs[name].logs()


@pytest.mark.parametrize(("name", "ranks"), [("chat-lora-ddp", 2), ("dpo-lora", 1), ("grpo-lora-ddp", 2)])
def test_each_task_with_lora_saves_the_adapter_alone(jobs, name, ranks):
    from safetensors.torch import load_file

    job = jobs[name]
    records = train_records(job)
    assert [record["step"] for record in records] == list(range(1, job.spec.train.max_steps + 1))
    saved = load_file(job.dir / "output" / "model" / "adapter_model.safetensors")
    assert saved and all("lora_" in name for name in saved)
    assert ("2 process(es)" in job.logs()) == (ranks == 2)
    if name == "chat-lora-ddp":
        assert records[-1]["loss"] < records[0]["loss"], records
    if name == "dpo-lora":  # the reference is the base model with the adapter switched off: no second copy
        assert records[0]["loss"] == pytest.approx(0.6931, abs=1e-3) and "rewards/margins" in records[-1]
    if name == "grpo-lora-ddp":
        assert all("rewards/correct_answer/mean" in record for record in records)


@pytest.mark.parametrize(
    ("name", "series"),
    [("dpo-ddp", {"chosen", "rejected", "margin", "accuracy"}), ("grpo", {"correct_answer", "digit_share", "total"})],
)
def test_the_live_chart_shows_the_rewards_next_to_loss(jobs, name, series):
    from nbtoolkit.notebook.charts import ChartFigure

    figure = ChartFigure()
    image = figure.draw(jobs[name].records(), name)
    assert image.startswith(b"\x89PNG")
    assert set(figure.reward_lines) == series and figure.rate.get_title() == "Rewards"
    assert all(len(line.get_xdata()) == len(train_records(jobs[name])) for line in figure.reward_lines.values())
    assert bool(figure.lengths) == (name == "grpo")  # GRPO's completion length on the right axis


@pytest.mark.parametrize("name", ["chat", "chat-lora-ddp"])
def test_the_exported_model_serves_the_template_it_trained_with_and_stops_at_its_end_of_turn(jobs, name, tmp_path):
    """`nbtoolkit export ID --format merged`: a full model (a LoRA job's adapter merged in) whose template reads the
    same from tokenizer_config.json (llama.cpp's converter and older servers read it there first) and from
    chat_template.jinja (transformers 5 writes only that), and whose generation config stops at the end of turn."""
    import json

    from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

    from nbtoolkit.train.chat_template import chat_tokenizer

    job = jobs[name]
    with warnings.catch_warnings():
        warnings.simplefilter("error", ExportWarning)  # its end of turn carried loss: no warning
        out = job.export("merged", tmp_path / "served")
    trained = chat_tokenizer(job.spec)
    assert json.loads((out / "tokenizer_config.json").read_text())["chat_template"] == trained.chat_template
    assert (out / "chat_template.jinja").read_text() == trained.chat_template
    assert not (out / "adapter_config.json").exists() and not (out / "training_args.bin").exists()
    served = AutoTokenizer.from_pretrained(out)
    conversation = [{"role": "user", "content": "What is 2 + 3?"}]
    assert (
        served.apply_chat_template(conversation, add_generation_prompt=True, return_dict=True)["input_ids"]
        == (trained.apply_chat_template(conversation, add_generation_prompt=True, return_dict=True)["input_ids"])
    )
    end_of_turn = served.convert_tokens_to_ids("<|im_end|>")
    ends = GenerationConfig.from_pretrained(out).eos_token_id
    assert end_of_turn in (ends if isinstance(ends, list) else [ends])
    assert AutoModelForCausalLM.from_pretrained(out).config.vocab_size >= len(served)  # loads as a full model
    with pytest.raises(LaunchError, match=r"is not empty; give --out a new folder"):
        job.export("merged", out)


def test_a_job_whose_end_of_turn_never_carried_loss_is_warned_before_its_export(jobs, tmp_path, monkeypatch, capsys):
    from nbtoolkit.cli import main

    job = jobs["chat-eot-masked"]
    assert train_records(job)  # it trained
    sentence = (
        "the end-of-turn token <|im_end|> carries loss in none of the 160 rows read (dataset.chat_template closes the "
        "assistant's turn outside its {% generation %} markers), so the model does not learn to stop"
    )
    with pytest.warns(ExportWarning, match=re.escape(f"job {job.id}: {sentence}")):
        assert (job.export("merged", tmp_path / "api") / "config.json").is_file()  # warned, then exported
    monkeypatch.setenv("NBTOOLKIT_HOME", str(job.store.home))
    assert main(["export", job.id, "--out", str(tmp_path / "cli")]) == 0
    said = capsys.readouterr()
    assert said.err.startswith(f"nbtoolkit: warning: job {job.id}: {sentence}")
    assert said.out.strip() == str(tmp_path / "cli")
