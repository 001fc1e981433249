"""Chat, preference and grpo without training: data formats, the data preview, shipping reward functions,
the plan's reference model and generations, and what the remote backends install."""

from __future__ import annotations

import json

import pytest

from nbtoolkit.inputs.chat_formats import FormatError, as_messages, detect_format
from nbtoolkit.planner import plan
from nbtoolkit.rewards import RewardError, kernel_rewards, load, ship, with_rewards
from nbtoolkit.spec import SpecError, load_spec

ROWS = {
    "messages": {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]},
    "sharegpt": {"conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "hello"}]},
    "alpaca": {"instruction": "greet", "input": "in French", "output": "bonjour"},
    "prompt-completion": {"prompt": "hi", "completion": "hello"},
}


@pytest.mark.parametrize("fmt", ROWS)
def test_each_format_is_detected_and_becomes_a_conversation(fmt):
    row = ROWS[fmt]
    assert detect_format(row) == fmt
    messages = as_messages(row, fmt)
    assert [m["role"] for m in messages] == ["user", "assistant"]
    assert messages[-1]["content"] in ("hello", "bonjour")
    if fmt == "alpaca":
        assert messages[0]["content"] == "greet\n\nin French"


def test_data_in_no_format_gets_one_sentence_naming_the_columns():
    with pytest.raises(FormatError) as found:
        detect_format(["text", "label"])
    message = str(found.value)
    assert "\n" not in message and "label, text" in message
    for needed in ("messages", "conversations", "instruction + output", "prompt + completion"):
        assert needed in message
    with pytest.raises(FormatError, match="dataset.format 'sharegpt' needs the column"):
        detect_format(["messages"], "sharegpt")


def test_data_preview_renders_as_trained_with_the_loss_tokens_marked(tmp_path):
    from nbtoolkit.inputs.data_preview import preview_data

    path = tmp_path / "train.jsonl"
    path.write_text(json.dumps(ROWS["sharegpt"]) + "\n" + json.dumps(ROWS["sharegpt"]) + "\n")
    preview = preview_data({"task": "chat", "dataset": {"files": {"train": str(path)}}})
    assert preview.data_format == "sharegpt"
    assert (
        preview.rendered[0].marked() == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n[[hello<|im_end|>]]\n"
    )
    assert preview.lengths[0].cut_at == 128 and preview.lengths[0].lengths == [preview.rendered[0].tokens] * 2
    text = str(preview)
    assert "format: sharegpt" in text and "[[hello<|im_end|>]]" in text
    from nbtoolkit.notebook.data_view import data_html  # the form's Data section

    assert "<mark title='carries loss'>hello&lt;|im_end|&gt;</mark>" in data_html(preview)

    path.write_text(json.dumps({"text": "x", "label": 1}) + "\n")
    from nbtoolkit.train.errors import TrainError

    with pytest.raises(TrainError, match="in no chat format"):
        preview_data({"task": "chat", "dataset": {"files": {"train": str(path)}}})


def test_either_turn_keys_are_read_and_a_malformed_row_is_one_sentence_before_training(tmp_path):
    from datasets import Dataset

    from nbtoolkit.inputs.data_preview import preview_data
    from nbtoolkit.tasks.chat.train import conversations
    from nbtoolkit.train.errors import TrainError

    openai_turns, sharegpt_turns = ROWS["messages"]["messages"], ROWS["sharegpt"]["conversations"]
    assert as_messages({"messages": sharegpt_turns}, "messages") == openai_turns
    assert as_messages({"conversations": openai_turns}, "sharegpt") == openai_turns
    spec = load_spec({"task": "chat"})
    for rows, words in [
        (
            [ROWS["messages"], {"messages": [{"speaker": "user", "text": "hi"}]}],
            "row 2's messages, turn 1 has the keys",
        ),
        ([ROWS["alpaca"], {**ROWS["alpaca"], "output": None}], "row 2's output is null; it must be a non-empty text"),
    ]:
        path = tmp_path / "train.jsonl"
        path.write_text("".join(json.dumps(row) + "\n" for row in rows))
        with pytest.raises(TrainError) as found:
            preview_data({"task": "chat", "dataset": {"files": {"train": str(path)}}})
        assert words in str(found.value) and "\n" not in str(found.value)
        with pytest.raises(TrainError, match=f"the train split: {words}"):
            conversations(spec, Dataset.from_list(rows), "train")
    with pytest.raises(
        FormatError, match="has the keys speaker, text; a turn needs role \\+ content or from \\+ value"
    ):
        as_messages({"messages": [{"speaker": "user", "text": "hi"}]}, "messages", 1)


#: ChatML whose assistant turn closes outside the generation markers: its end of turn never carries loss
EOT_OUTSIDE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{% if m['role'] == 'assistant' %}{% generation %}"
    "{{ m['content'] }}{% endgeneration %}<|im_end|>\n{% else %}{{ m['content'] }}<|im_end|>\n{% endif %}"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def test_a_chat_template_whose_end_of_turn_carries_no_loss_is_warned_under_the_rows(tmp_path):
    from nbtoolkit.inputs.data_preview import preview_data
    from nbtoolkit.notebook.data_view import data_html

    path = tmp_path / "train.jsonl"
    path.write_text(json.dumps(ROWS["messages"]) + "\n" + json.dumps(ROWS["messages"]) + "\n")
    masked = preview_data({"task": "chat", "dataset": {"files": {"train": str(path)}, "chat_template": EOT_OUTSIDE}})
    assert masked.rendered[0].marked() == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n[[hello]]<|im_end|>\n"
    assert masked.warning == (
        "the end-of-turn token <|im_end|> carries loss in none of the 2 rows read (dataset.chat_template closes "
        "the assistant's turn outside its {% generation %} markers), so the model does not learn to stop; put the "
        "end-of-turn token inside the markers, or stop generation yourself"
    )
    assert str(masked).endswith(f"warning: {masked.warning}")
    assert "<b>Warning:</b> the end-of-turn token &lt;|im_end|&gt; carries loss in none" in data_html(masked)
    trained = preview_data({"task": "chat", "dataset": {"files": {"train": str(path)}, "chat_template": "chatml"}})
    assert trained.warning is None and "warning" not in str(trained)
    every_token = {"task": "chat", "dataset": {"files": {"train": str(path)}, "chat_template": EOT_OUTSIDE}}
    assert preview_data({**every_token, "extra": {"assistant_only_loss": False}}).warning is None


def test_the_end_of_turn_is_the_token_the_template_closes_a_reply_with(tmp_path):
    """A template whose assistant turn ends at another special token than the tokenizer's eos (Llama-3's pasted
    onto its base model: <|eot_id|>, not <|end_of_text|>): generation, the export and a GGUF stop there, and the
    preview does not warn of an end of turn that was trained."""
    from nbtoolkit.inputs.data_preview import preview_data
    from nbtoolkit.train.chat_template import chat_tokenizer

    other_end = EOT_OUTSIDE.replace(
        "{% generation %}{{ m['content'] }}{% endgeneration %}<|im_end|>",
        "{% generation %}{{ m['content'] }}<|endoftext|>{% endgeneration %}",
    )
    path = tmp_path / "train.jsonl"
    path.write_text(json.dumps(ROWS["messages"]) + "\n")
    spec = {"task": "chat", "dataset": {"files": {"train": str(path)}, "chat_template": other_end}}
    assert chat_tokenizer(load_spec(spec)).eos_token == "<|endoftext|>"
    assert preview_data(spec).warning is None
    assert chat_tokenizer(load_spec({"task": "chat"})).eos_token == "<|im_end|>"  # the bundled template's own


def test_a_template_without_generation_markers_trains_every_token_or_is_refused_before_launch(tmp_path):
    from nbtoolkit.inputs.data_preview import preview_data

    path = tmp_path / "train.jsonl"
    path.write_text(json.dumps(ROWS["messages"]) + "\n")
    plain = "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    data = {"task": "chat", "dataset": {"files": {"train": str(path)}, "chat_template": plain}}
    with pytest.raises(SpecError) as found:
        load_spec(data)
    assert "dataset.chat_template has no {% generation %} markers" in str(found.value)
    assert "extra: {assistant_only_loss: false}" in str(found.value) and "\n" not in str(found.value)
    preview = preview_data({**data, "extra": {"assistant_only_loss": False}})
    assert preview.rendered[0].marked() == "[[user: hi\nassistant: hello\n]]"  # every token, as SFT trains then
    assert "\ncolumns used: messages\n" in str(preview)  # the detected format's, in the CLI and the form
    from nbtoolkit.notebook.data_view import data_html

    assert "columns used: messages</p>" in data_html(preview)
    from nbtoolkit.train.chat_template import chat_tokenizer, loss_template
    from nbtoolkit.train.errors import TrainError

    spec = load_spec({"task": "chat"})
    tokenizer = chat_tokenizer(spec)
    tokenizer.chat_template = plain  # a model's own template TRL has no training version of: the job's check
    with pytest.raises(
        TrainError, match=r"^the chat template of model 'nbtoolkit/tiny-chat' has no \{% generation %\} markers"
    ):
        loss_template(spec, tokenizer)


def counts_words(completions, **kwargs):
    return [float(len(str(c).split())) for c in completions]


def test_a_shipped_reward_runs_from_its_source_alone():
    shipped = ship(counts_words)
    assert load(shipped)(["a b c", "d"]) == [3.0, 1.0]
    spec = with_rewards(load_spec({"task": "grpo"}), [counts_words])
    assert spec.reward.functions[0].name == "counts_words"


def test_what_cannot_be_shipped_is_refused_in_one_sentence():
    factor = 2.0

    def scaled(completions, **kwargs):
        return [factor for _ in completions]

    for function, words in [
        (scaled, "defined inside a function"),
        (lambda completions, **kwargs: [0.0], "a lambda"),
        (len, "is not a Python function"),
    ]:
        with pytest.raises(RewardError) as found:
            ship(function)
        assert words in str(found.value) and "\n" not in str(found.value)
    with pytest.raises(SpecError, match="rewards apply to task grpo"):
        with_rewards(load_spec({"task": "chat"}), [counts_words])


def test_a_reward_defined_in_a_notebook_cell_is_shipped_by_name(shell):
    """The function, the imports and constants it reads, and the kernel helpers it calls travel; a live object not."""
    shell.run_cell(
        "import math\nimport re\nSCALE = 0.5\nPATTERN = re.compile(r'\\d+')\n"
        "def _size(text):\n    return math.log1p(len(text))\n"
        "def length_reward(completions, **kwargs):\n    return [SCALE * _size(str(c)) for c in completions]\n"
        "def digits_reward(completions, **kwargs):\n    return [float(bool(PATTERN.search(str(c)))) for c in completions]\n"
    )
    data = kernel_rewards({"task": "grpo", "reward": {"functions": ["length_reward"]}}, shell.user_ns)
    shipped = data["reward"]["functions"][0]
    assert shipped["source"].startswith("import math\nSCALE = 0.5\ndef _size(text):")
    assert load(shipped)(["abc"]) == pytest.approx([0.5 * 1.3862943611198906])
    assert load_spec(data).reward.functions[0].name == "length_reward"
    with pytest.raises(SpecError, match="digits_reward reads PATTERN, a live Pattern object of the kernel"):
        kernel_rewards({"task": "grpo", "reward": {"functions": ["digits_reward"]}}, shell.user_ns)
    with pytest.raises(SpecError, match="'nothing' is no function of this kernel"):
        kernel_rewards({"task": "grpo", "reward": {"functions": ["nothing"]}}, shell.user_ns)


def test_reward_files_travel_inside_the_spec(tmp_path):
    from nbtoolkit.spec_parts.paths import absolute_paths

    (tmp_path / "my_rewards.py").write_text("def short(completions, **kwargs):\n    return [1.0] * len(completions)\n")
    spec = load_spec(
        {"task": "grpo", "reward": {"functions": ["my_rewards.py:short", "nbtoolkit.rewards:number_reply"]}}
    )
    shipped = absolute_paths(spec, tmp_path).reward.functions
    assert shipped[0].name == "short" and "def short" in shipped[0].source
    assert shipped[1] == "nbtoolkit.rewards:number_reply"
    with pytest.raises(SpecError, match="defines no function 'long'"):
        absolute_paths(load_spec({"task": "grpo", "reward": {"functions": ["my_rewards.py:long"]}}), tmp_path)


def test_a_reward_file_with_constants_travels_and_bad_python_is_one_sentence(tmp_path):
    from nbtoolkit.spec_parts.paths import absolute_paths

    (tmp_path / "numbers.py").write_text(
        "import re\nNUMBER = re.compile(r'\\d+')\nLIMIT: int = 1\n\nasync def later():\n    pass\n\n"
        "def has_number(completions, **kwargs):\n    return [float(bool(NUMBER.search(c))) for c in completions]\n"
    )
    (tmp_path / "broken.py").write_text("def has_number(:\n    pass\n")
    spec = load_spec({"task": "grpo", "reward": {"functions": ["numbers.py:has_number", "numbers.py:LIMIT"]}})
    shipped = absolute_paths(spec, tmp_path).reward.functions
    assert load(shipped[0])(["a 1", "b"]) == [1.0, 0.0] and shipped[1].name == "LIMIT"
    with pytest.raises(SpecError) as found:
        absolute_paths(load_spec({"task": "grpo", "reward": {"functions": ["broken.py:has_number"]}}), tmp_path)
    assert "broken.py is not valid Python (line 1: " in str(found.value) and "\n" not in str(found.value)


def test_a_notebook_reward_reading_the_kernel_in_its_def_line_is_shipped_whole_or_refused(shell):
    """Defaults, decorators and annotations are read when the def runs: they travel, or the launch refuses."""
    shell.run_cell(
        "SCALE = 2.0\nGONE = 1.0\nfrom typing import List\n"
        "def tag(function):\n    function.tagged = True\n    return function\n"
        "@tag\ndef scaled(completions: List[str], scale=SCALE, **kwargs) -> List[float]:\n"
        "    return [scale for _ in completions]\n"
        "def stale(completions, *, scale=GONE, **kwargs):\n    return [scale for _ in completions]\n"
        "del GONE\n"
    )
    shipped = ship(shell.user_ns["scaled"])
    assert load(shipped)(["a", "b"]) == [2.0, 2.0] and load(shipped).tagged
    with pytest.raises(RewardError) as found:
        ship(shell.user_ns["stale"])
    assert "stale cannot be shipped" in str(found.value) and "'GONE' is not defined" in str(found.value)
    for source, words in [
        ("def g(: pass", "is not valid Python (line 1: "),
        ("def g(c):\n    return c\n", "defines no function 'f'"),
    ]:
        with pytest.raises(SpecError) as found:  # written into a spec by hand: refused at load, not in the job
            load_spec({"task": "grpo", "reward": {"functions": [{"name": "f", "source": source}]}})
        assert str(found.value).startswith(f"reward.functions 'f': its source {words}"), str(found.value)
    with pytest.raises(RewardError, match=r"fails to run \(SyntaxError"):
        load({"name": "f", "source": "def g(: pass"})
    with pytest.raises(RewardError, match=r"defines no function f \(it defines g\)"):
        load({"name": "f", "source": "def g(completions, **kwargs):\n    return [0.0] * len(completions)\n"})


QWEN = {
    "model": "Qwen/Qwen2.5-0.5B-Instruct",
    "hardware": {"accelerator": "cuda", "instance_type": "g5.xlarge"},
    "precision": "bf16",
    "dataset": {"max_length": 512},
    "train": {"batch_size": 2, "max_steps": 100},
}


def test_plan_of_full_dpo_counts_the_reference_model_and_lora_does_not():
    chat, dpo = plan({**QWEN, "task": "chat"}), plan({**QWEN, "task": "preference"})
    reference = 4 * chat.params  # frozen fp32 weights: no gradients, no optimizer states
    assert dpo.memory.weights - chat.memory.weights == reference
    assert dpo.memory.gradients == chat.memory.gradients and dpo.memory.optimizer == chat.memory.optimizer
    assert dpo.memory.activations == 2 * chat.memory.activations  # chosen and rejected
    assert "reference model" in dpo.formula and "reference model" not in chat.formula
    lora = {"adapter": {"r": 16}}
    chat_lora, dpo_lora = plan({**QWEN, **lora, "task": "chat"}), plan({**QWEN, **lora, "task": "preference"})
    assert dpo_lora.memory.weights == chat_lora.memory.weights and "reference model" not in dpo_lora.formula


def test_plan_of_grpo_holds_the_generations_and_a_reference_only_with_its_kl_term():
    chat = plan({**QWEN, "task": "chat", "dataset": {"max_length": 544}})
    grpo = plan({**QWEN, "task": "grpo", "reward": GRPO_REWARD})
    assert grpo.memory.weights == chat.memory.weights
    assert grpo.memory.activations > chat.memory.activations  # + the completions' KV cache
    assert "KV cache" in grpo.formula
    with_kl = plan({**QWEN, "task": "grpo", "reward": {**GRPO_REWARD, "beta": 0.04}})
    assert with_kl.memory.weights - grpo.memory.weights == 4 * grpo.params


GRPO_REWARD = {"functions": ["nbtoolkit.rewards:number_reply"], "max_completion_length": 32, "num_generations": 2}


def test_remote_backends_install_trl_for_these_tasks_and_peft_for_adapters():
    from nbtoolkit.backends.sagemaker.container import code_files
    from nbtoolkit.backends.sagemaker.render import container_image
    from nbtoolkit.backends.skypilot.task import requirement

    chat = load_spec({"task": "chat"})
    assert chat.extras_used == ("chat",) and "[chat]" in requirement(chat)
    sagemaker = {
        "hardware": {"target": "sagemaker", "instance_type": "ml.g5.xlarge"},
        "sagemaker": {"role": "arn:aws:iam::111122223333:role/sm"},
    }
    preference = load_spec({"task": "preference", **sagemaker})
    files = code_files(preference, container_image(preference))
    # pinned at the version the image's lock lifts TRL to (nbtoolkit.launching.image_pins), the floor's 1.16.0
    assert "trl==1.16.0" in next(text for name, text in files.items() if name.endswith("requirements.txt")).split()
    # PEFT too where the run trains an adapter: a user's image_uri without it billed, then failed at import
    adapter = load_spec({"task": "causal-lm", "adapter": {"r": 8}, **sagemaker})
    with_adapter = code_files(adapter, container_image(adapter))
    requirements = next(text for name, text in with_adapter.items() if name.endswith("requirements.txt"))
    assert "peft>=0.17.1" in requirements.splitlines() and "trl" not in requirements


def test_spec_rules_of_the_new_blocks_are_one_sentence():
    for data, words in [
        ({"task": "chat", "preference": {}}, "the preference block applies to task preference"),
        ({"task": "grpo", "dataset": {"files": {"train": "x.jsonl"}}}, "task grpo on your own data needs reward"),
        ({"task": "grpo", "reward": {"functions": ["nocolon"]}}, "names no function"),
        (  # a path without .py is no module: it was launched, then failed in the job on a TypeError
            {"task": "grpo", "reward": {"functions": ["../../../../etc/passwd:f"]}},
            (
                "reward.functions '../../../../etc/passwd:f': '../../../../etc/passwd' is neither a dotted module "
                "name (package.module) nor a file ending in .py; write module:function or path/to/file.py:function"
            ),
        ),
        ({"task": "grpo", "reward": {"functions": ["rewards.py:my-reward"]}}, "'my-reward' is not a Python function"),
        ({"task": "grpo", "reward": {"use_vllm": True}}, "reward.use_vllm needs a cuda accelerator"),
        ({"task": "chat", "dataset": {"chat_template": "llama9"}}, "neither a Jinja template nor a named one"),
        ({"task": "preference", "dataset": {"packing": True}}, "dataset.packing applies to task chat; task preference"),
        ({"task": "preference", "preference": {"method": "ppo"}}, "preference.method"),
        ({"task": "preference", "reward": {}}, "the reward block applies to task grpo (task is 'preference')"),
        (
            {"task": "grpo", "train": {"batch_size": 3}, "reward": {"num_generations": 2}},
            (
                "train.batch_size x train.grad_accum (3) x 1 rank(s) must be divisible by reward.num_generations (2), "
                "so that each batch holds whole groups of completions; change one of them"
            ),
        ),
        (
            {"task": "grpo", "train": {"batch_size": 4, "eval_batch_size": 3}, "reward": {"num_generations": 2}},
            (
                "train.eval_batch_size (3) x 1 rank(s) must be divisible by reward.num_generations (2), so that each "
                "batch holds whole groups of completions; change one of them, or set dataset.eval_split: null"
            ),
        ),
    ]:
        with pytest.raises(SpecError) as found:
            load_spec(data)
        assert words in str(found.value), str(found.value)


def test_reward_and_preference_blocks_trl_would_refuse_are_refused_before_launch():
    grpo = {"task": "grpo", "train": {"batch_size": 8}}
    for data, words in [
        ({**grpo, "reward": {"weights": [1, 2, 3]}}, "3 value(s) for 2 reward(s) (the bundled default rewards)"),
        ({**grpo, "train": {"batch_size": 6}}, "train.batch_size x train.grad_accum (6) x 1 rank(s)"),
        ({**grpo, "train": {"batch_size": 8, "eval_batch_size": 2}}, "or set dataset.eval_split: null"),
        ({"task": "preference", "preference": {"loss_type": "bogus"}}, "'bogus' is not one method dpo takes"),
        ({"task": "preference", "preference": {"method": "orpo", "loss_type": "ipo"}}, "applies to method dpo or kto"),
    ]:
        with pytest.raises(SpecError) as found:
            load_spec(data)
        assert words in str(found.value) and "\n" not in str(found.value), str(found.value)
    two_ranks = {"hardware": {"devices": 2}, "launcher": "torchrun", "parallelism": {"strategy": "ddp"}}
    assert load_spec({**grpo, **two_ranks, "train": {"batch_size": 2}, "reward": {"weights": [1, 0.5]}}).reward
    assert load_spec({**grpo, "train": {"batch_size": 2, "grad_accum": 2}, "dataset": {"eval_split": None}})
    assert load_spec({"task": "preference", "preference": {"method": "kto", "loss_type": "apo_zero_unpaired"}})


def test_the_chat_what_fits_doc_is_the_planners():
    from pathlib import Path

    from nbtoolkit.planner.chat_report import document

    committed = Path(__file__).resolve().parent.parent / "docs" / "chat-what-fits-where.md"
    assert committed.read_text() == document(), "python -m nbtoolkit.planner.chat_report --out " + str(committed)


def test_finetune_magic_ships_a_reward_named_in_its_body(shell):
    """`%%finetune` with `reward: {functions: [name]}`: the kernel's function reaches the rendered job's spec.json."""
    shell.run_cell(
        "def short_reply(completions, **kwargs):\n    return [1.0 / (1 + len(str(c))) for c in completions]\n"
    )
    shown = shell.run_cell_magic("finetune", "--dry-run", "task: grpo\nreward:\n  functions: [short_reply]\n")
    shipped = json.loads(shown.launch.files["spec.json"])["reward"]["functions"]
    assert [function["name"] for function in shipped] == ["short_reply"]
    assert shipped[0]["source"].startswith("def short_reply(completions, **kwargs):")
    assert load(shipped[0])(["ab"]) == [1.0 / 3]


@pytest.mark.parametrize(
    "task, key, field",
    [
        ("chat", "max_length", "dataset.max_length"),
        ("chat", "packing", "dataset.packing"),
        ("preference", "beta", "preference.beta"),
        ("grpo", "beta", "reward.beta"),
        ("grpo", "num_generations", "reward.num_generations"),
    ],
)
def test_an_extra_key_a_task_sets_from_its_own_field_is_refused_naming_the_field(task, key, field):
    """Each was applied over the field in the job (TRL's config took extra last) while the plan read the field."""
    with pytest.raises(SpecError) as refused:
        load_spec({"task": task, "extra": {key: 4}})
    assert str(refused.value) == (
        f"extra.{key} would override {field}, which sets it; set {field} instead and remove extra.{key}"
    )


@pytest.mark.parametrize("task", ["chat", "preference", "grpo", "reward-model", "vision-chat"])
def test_a_trl_task_on_trainium_is_refused_before_launch(task):
    """TRL 1.x over Neuron SDK 2.26's stack would replace its transformers 4.55.4 (pip lifts it to TRL's floor and
    past optimum-neuron's pin): refused in one sentence, not billed."""
    spec = {"task": task, "hardware": {"accelerator": "neuron", "instance_type": "trn1.2xlarge", "devices": 2}}
    with pytest.raises(SpecError, match=rf"^task {task} is trained by TRL, .* holds transformers at 4\.55\.4"):
        load_spec(spec)
