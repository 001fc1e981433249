"""One preflight before anything starts: `plan` lists what the spec's inputs get wrong (and exits 1), `launch` refuses
it with the same sentence and starts nothing. Each case used to pass `plan` and fail 20-30 s into the job."""

from __future__ import annotations

import json
import re

import pytest

from nbtoolkit import cli
from nbtoolkit.api import launch, plan
from nbtoolkit.backends import LaunchError
from nbtoolkit.inputs.preflight import data_problem
from nbtoolkit.planner import ModelShapeError
from nbtoolkit.spec import SpecError, load_spec

TRAIN = {"max_steps": 2}


def _jsonl(path, rows) -> str:
    path.write_text("".join((row if isinstance(row, str) else json.dumps(row)) + "\n" for row in rows))
    return str(path)


def _unmarked_model(path) -> str:
    """A chat model's folder (config and tokenizer, no weights) whose own template marks no assistant tokens, and
    which TRL has no training version of."""
    from nbtoolkit.train.models import load_tokenizer, model_config

    tokenizer = load_tokenizer("nbtoolkit/tiny-chat")
    tokenizer.chat_template = "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    tokenizer.save_pretrained(path)
    model_config("nbtoolkit/tiny-chat").save_pretrained(path)
    return str(path)


LONG = " ".join(["the river ran past the old mill"] * 40)  # about 300 tokens of the bundled tokenizer


def _asked(question: str) -> dict:
    return {"messages": [{"role": "user", "content": question}, {"role": "assistant", "content": "ok"}]}


def _cases(tmp_path) -> dict[str, tuple[dict, str]]:
    chat = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}
    unanswered = {"messages": [{"role": "user", "content": "hi"}]}
    pair = {"prompt": "2+2?", "chosen": "4", "rejected": "5"}
    return {
        "missing file": (
            {"task": "chat", "dataset": {"files": {"train": str(tmp_path / "nowhere.jsonl")}}},
            f"dataset.files.train: {tmp_path / 'nowhere.jsonl'} does not exist",
        ),
        "SFT data for preference": (
            {"task": "preference", "dataset": {"files": {"train": _jsonl(tmp_path / "sft.jsonl", [chat])}}},
            "row 1 has no 'prompt'; preference rows need prompt, chosen, rejected",
        ),
        "no assistant turn": (
            {"task": "chat", "dataset": {"files": {"train": _jsonl(tmp_path / "chat.jsonl", [chat, unanswered])}}},
            "row 2 has no assistant turn, so nothing in it trains",
        ),
        "pair without rejected": (
            {
                "task": "preference",
                "dataset": {"files": {"train": _jsonl(tmp_path / "pairs.jsonl", [pair, {**pair, "rejected": None}])}},
            },
            "row 2 has no 'rejected'",
        ),
        "broken JSON line": (
            {
                "task": "chat",
                "dataset": {"files": {"train": _jsonl(tmp_path / "broken.jsonl", [chat, '{"messages": ['])}},
            },
            "line 2 is not valid JSON",
        ),
        "missing column": (
            {
                "task": "text-classification",
                "dataset": {
                    "files": {"train": _jsonl(tmp_path / "cls.jsonl", [{"text": "a", "label": 1}, {"text": "b"}])}
                },
            },
            "row 2 has no 'label' (dataset.label_column",
        ),
        "adapter module the model lacks": (
            {"task": "causal-lm", "adapter": {"target_modules": ["q_proj"]}},
            "adapter.target_modules q_proj not found in model 'nbtoolkit/tiny-gpt2'",
        ),
        "chat template without generation markers": (
            {"task": "chat", "model": _unmarked_model(tmp_path / "unmarked")},
            (
                f"the chat template of model '{tmp_path / 'unmarked'}' has no {{% generation %}} markers, so the loss "
                "on assistant turns only cannot find the assistant's tokens; set extra: {assistant_only_loss: false}"
            ),
        ),
        "every reply past max_length": (  # TRL dropped every row: a `num_samples=0` traceback in the job
            {"task": "chat", "dataset": {"files": {"train": _jsonl(tmp_path / "long.jsonl", [_asked(LONG)] * 2)}}},
            (
                f"all 2 rows of dataset.files.train ({tmp_path / 'long.jsonl'}) lose every assistant turn at "
                "dataset.max_length 128 (the longest prompt runs "
            ),
        ),
        "misspelt extra key": (
            {"task": "chat", "extra": {"lerning_rate": 1e-3}},
            (
                "extra.lerning_rate is not an argument of SFTConfig, task chat's trainer arguments (did you mean "
                "train.learning_rate?); fix its name or remove it"
            ),
        ),
        "extra key of another task": (
            {"task": "causal-lm", "extra": {"max_length": 64}},  # SFT's and DPO's, not TrainingArguments'
            "extra.max_length is not an argument of TrainingArguments, task causal-lm's trainer arguments; fix its",
        ),
        "pair mixing a text and a conversation": (
            {
                "task": "preference",
                "dataset": {
                    "files": {
                        "train": _jsonl(
                            tmp_path / "mixed.jsonl",
                            [pair, {**pair, "chosen": [{"role": "assistant", "content": "4"}]}],
                        )
                    }
                },
            },
            "row 2's chosen is a conversation but row 1's prompt is a text; give every prompt, chosen, rejected as",
        ),
        "hub model not fetched while offline": (
            {"task": "chat", "model": "Qwen/Qwen2.5-0.5B-Instruct"},  # the planner sizes it from its own table
            "model 'Qwen/Qwen2.5-0.5B-Instruct' is not on this machine and the Hugging Face Hub is off here",
        ),
        "hub dataset not cached while offline": (
            {"task": "text-classification", "dataset": {"name": "nobody-here/NeverFetched"}},
            "dataset.name 'nobody-here/NeverFetched' is not cached on this machine and the Hugging Face Hub is off",
        ),
    }


@pytest.mark.parametrize(
    "case",
    [
        "missing file",
        "SFT data for preference",
        "no assistant turn",
        "pair without rejected",
        "broken JSON line",
        "missing column",
        "adapter module the model lacks",
        "chat template without generation markers",
        "every reply past max_length",
        "misspelt extra key",
        "extra key of another task",
        "pair mixing a text and a conversation",
        "hub model not fetched while offline",
        "hub dataset not cached while offline",
    ],
)
def test_each_bad_input_is_refused_by_plan_and_launch_in_one_sentence(case, tmp_path, store, capsys):
    spec, sentence = _cases(tmp_path)[case]
    spec = {**spec, "train": TRAIN}
    planned = plan(spec, store=store)
    assert len(planned.refused) == 1 and sentence in planned.refused[0], planned.refused
    assert "\n" not in planned.refused[0] and "Traceback" not in planned.refused[0]

    spec_file = tmp_path / "spec.json"
    spec_file.write_text(json.dumps(spec))
    assert cli.main(["plan", str(spec_file)]) == 1
    assert sentence in capsys.readouterr().out

    with pytest.raises(LaunchError) as refused:
        launch(spec, store=store)
    assert str(refused.value) == planned.refused[0]
    assert store.list() == []  # nothing started


@pytest.mark.parametrize("where", ["hub", "folder"])
def test_a_model_the_planner_cannot_size_either_is_refused_saying_why(where, tmp_path, store, capsys):
    model, sentence = {
        "hub": ("nobody-here/never-fetched-7b", "(hf download nobody-here/never-fetched-7b) or give a local model"),
        "folder": (str(tmp_path), f"model {tmp_path} is a folder without config.json"),
    }[where]
    spec = {"task": "chat", "model": model, "train": TRAIN}
    with pytest.raises(ModelShapeError) as unsized:
        plan(spec, store=store)
    assert sentence in str(unsized.value)
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(json.dumps(spec))
    assert cli.main(["plan", str(spec_file)]) != 0
    assert sentence in capsys.readouterr().err
    with pytest.raises(LaunchError, match=re.escape(sentence)):
        launch(spec, store=store)
    assert store.list() == []


def test_good_inputs_pass_the_preflight(tmp_path, store):
    chat = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}
    spec = {"task": "chat", "dataset": {"files": {"train": _jsonl(tmp_path / "ok.jsonl", [chat] * 3)}}, "train": TRAIN}
    assert plan(spec, store=store).refused == []


def test_plan_warns_of_chat_rows_max_length_cuts_before_their_reply(tmp_path, store, capsys):
    """TRL keeps a row's first max_length tokens and drops a row left without a reply token: silently, before."""
    from transformers import AutoTokenizer

    from nbtoolkit.inputs.bundled import tokenizer_dir

    train = _jsonl(tmp_path / "some-long.jsonl", [_asked("hi"), _asked(LONG), _asked("2+2?")])
    spec = {"task": "chat", "dataset": {"files": {"train": train}}, "train": TRAIN}
    # the prompt before the reply, as the bundled ChatML template renders it up to the assistant's turn
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir("nbtoolkit/tiny-chat"))
    question = _asked(LONG)["messages"][:1]
    prompt = len(tokenizer.apply_chat_template(question, add_generation_prompt=True, return_dict=True)["input_ids"])
    planned = plan(spec, store=store)
    assert planned.refused == [] and planned.warned == [
        (
            f"1 of the 3 rows of dataset.files.train ({train}) lose every assistant turn at dataset.max_length 128 (the "
            f"longest prompt runs {prompt} tokens before its first reply), and TRL drops them; raise dataset.max_length "
            f"above {prompt}, or shorten the prompts"
        )
    ]
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(json.dumps(spec))
    assert cli.main(["plan", str(spec_file)]) == 0
    assert f"warning: 1 of the 3 rows of dataset.files.train ({train})" in capsys.readouterr().out
    roomy = {**spec, "dataset": {**spec["dataset"], "max_length": prompt + 1}}
    assert plan(roomy, store=store).warned == []


ROWS = b'{"text": "a", "label": 1}\n'


@pytest.mark.parametrize(
    ("name", "content", "sentence"),
    [
        ("empty.jsonl", b"", "holds no rows; give a file with at least one row"),
        ("blank.jsonl", b"\n  \n\n", "holds no rows"),
        ("header.csv", b"text,label\n", "holds no rows"),
        ("labels.csv", b'text,label\nhi,a\nyo,""\n', "row 2 has no 'label' (dataset.label_column; the row has text)"),
        (
            "mixed.jsonl",
            ROWS + b'{"text": "b", "label": "x"}\n',
            "row 2's 'label' (dataset.label_column) is a string, but row 1's is a number; give it the same type",
        ),
        ("nan.jsonl", ROWS + b'{"text": "b", "label": NaN}\n', "row 2's 'label' (dataset.label_column) is NaN; give"),
        ("number.jsonl", ROWS + b"7\n", "row 2 is a number, not an object of columns"),
        ("broken.jsonl", b'{"text": "a\n', "line 1 is not valid JSON (column 10: Unterminated string starting at);"),
        ("ragged.csv", b"text,label\nhi,a\nyo,b,c\n", "row 2 has 3 cells but the header names 2 columns; quote a"),
        ("twice.jsonl", b'{"text": "a", "label": 1, "text": "b"}\n', "line 1 has the key 'text' twice in one object"),
        ("twice.json", b'[{"text": "a", "label": 1, "label": 2}]', None),  # datasets reads an array with json
        ("bom.jsonl", b"\xef\xbb\xbf" + ROWS, None),  # datasets reads these as the rows they are
        ("separator.jsonl", '{"text": "a\u2028b", "label": 1}\n'.encode(), None),
        ("separator.csv", "text,label\na\u2028b,1\n".encode(), None),
    ],
)
def test_a_data_file_is_refused_naming_its_row_or_read_as_datasets_reads_it(name, content, sentence, tmp_path):
    (tmp_path / name).write_bytes(content)
    spec = load_spec({"task": "text-classification", "dataset": {"files": {"train": str(tmp_path / name)}}})
    problem = data_problem(spec)
    assert problem == sentence or (sentence in problem and problem.startswith(f"dataset.files.train ({tmp_path}"))


@pytest.mark.parametrize(
    ("template", "error"),
    [
        ("{% generation %}{{ x }{% endgeneration %}", "line 1: unexpected '}'"),
        ("{% generation %}{{ x | shout }}{% endgeneration %}", "line 1: No filter named 'shout'"),  # parses
    ],
)
def test_an_invalid_chat_template_is_refused_as_invalid_not_as_unmarked(template, error):
    """Before, a template with a Jinja syntax error was refused for having no {% generation %} markers (or failed
    in the job with a 45-line traceback)."""
    with pytest.raises(SpecError, match=re.escape(f"dataset.chat_template is not a valid Jinja template ({error})")):
        load_spec({"task": "chat", "dataset": {"chat_template": template}})


RAISING = "{% for m in messages %}{% generation %}{{ raise_exception('no turns') }}{% endgeneration %}{% endfor %}"
CHAT = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}
#: compiles, and fails on every row with a Python error rather than a Jinja one
DIVIDING = "{% for m in messages %}{% generation %}{{ m.content / 2 }}{% endgeneration %}{% endfor %}"


def test_a_chat_template_whose_generation_blocks_hold_no_reply_is_refused(tmp_path, store):
    """Markers present but wrapping nothing: every check passed and TRL failed in the job."""
    template = (
        "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
        "{% generation %}{% endgeneration %}"
    )
    train = _jsonl(tmp_path / "train.jsonl", [CHAT])
    spec = {"task": "chat", "dataset": {"files": {"train": train}, "chat_template": template}, "train": TRAIN}
    (refused,) = plan(spec, store=store).refused
    assert refused.startswith(f"no row of dataset.files.train ({train}) has a token the loss is on")


def test_a_chat_template_that_fails_on_a_row_is_refused_by_plan_and_launch(tmp_path, store):
    """Before, plan passed it (or printed a traceback) and the job failed on its first row."""
    for template, said in ((RAISING, "no turns"), (DIVIDING, "unsupported operand type(s) for /")):
        train = _jsonl(tmp_path / "train.jsonl", [CHAT])
        spec = {"task": "chat", "dataset": {"files": {"train": train}, "chat_template": template}, "train": TRAIN}
        (refused,) = plan(spec, store=store).refused
        assert refused.startswith("the chat template (dataset.chat_template) fails on row 1 of the train split: ")
        assert said in refused
        with pytest.raises(LaunchError, match=re.escape(refused)):
            launch(spec, store=store)
    assert store.list() == []


@pytest.mark.parametrize(
    ("rows", "template", "sentence"),
    [
        (['{"messages": ['], None, "line 1 is not valid JSON"),
        ([], None, "holds no rows"),
        ([CHAT], RAISING, "the chat template (dataset.chat_template) fails on row 1 of the train split: no turns;"),
        ([CHAT], DIVIDING, "fails on row 1 of the train split: unsupported operand type(s) for /: 'str' and 'int';"),
    ],
)
def test_the_data_command_refuses_bad_data_in_one_sentence(rows, template, sentence, tmp_path, capsys):
    spec = {"task": "chat", "dataset": {"files": {"train": _jsonl(tmp_path / "train.jsonl", rows)}}}
    if template:
        spec["dataset"]["chat_template"] = template
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(json.dumps(spec))
    assert cli.main(["data", str(spec_file)]) != 0
    captured = capsys.readouterr()
    assert sentence in captured.err and len(captured.err.splitlines()) == 1
    assert "Traceback" not in captured.err + captured.out


def test_a_hub_dataset_cached_where_datasets_looks_passes_offline(cached_dataset, monkeypatch):
    """datasets loads an offline hub dataset from its cache (the fixture lays it out as datasets does): one cached
    passes, another is refused; datasets' own switch, HF_DATASETS_OFFLINE=0, wins over HF_HUB_OFFLINE."""
    from nbtoolkit.inputs.preflight import hub_dataset_problem

    cached_dataset("nobody-here/NeverFetched")
    assert hub_dataset_problem("nobody-here/NeverFetched") is None
    assert "is not cached on this machine" in hub_dataset_problem("nobody-here/other")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "0")
    assert hub_dataset_problem("nobody-here/other") is None


def test_a_hub_reward_model_is_checked_from_the_hub_cache_and_one_not_cached_is_said_unchecked(fetched, monkeypatch):
    from nbtoolkit.inputs.preflight import input_findings

    def findings(*models: str) -> tuple[list[str], list[str]]:
        return input_findings(load_spec({"task": "grpo", "reward": {"models": list(models)}}))

    fetched("acme/tiny-chat", {"architectures": ["LlamaForCausalLM"], "model_type": "llama"})
    fetched("acme/tiny-rm", {"architectures": ["LlamaForSequenceClassification"], "id2label": {"0": "LABEL_0"}})
    fetched("acme/two-labels", {"architectures": ["BertForSequenceClassification"], "num_labels": 2})
    chat_model = (
        "reward.models 'acme/tiny-chat' holds a LlamaForCausalLM model, not a reward model (a sequence-classification "
        "model with one output, as task reward-model trains); without that head it would score with random weights"
    )
    assert findings("acme/tiny-chat") == ([chat_model], [])
    assert findings("acme/two-labels")[0][0].startswith("reward.models 'acme/two-labels' holds a BertForSequence")
    assert findings("acme/tiny-rm") == ([], [])
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")  # the hub on: nothing is downloaded to check, it is said unchecked
    unchecked = (
        "reward.models 'acme/never-fetched' is not in this machine's Hugging Face cache, so whether it is a one-output "
        "sequence-classification model cannot be checked before launch (a chat model would score with a random "
        "head); fetch it first (hf download acme/never-fetched) to have it checked"
    )
    assert findings("acme/tiny-rm", "acme/never-fetched") == ([], [unchecked])


def test_reward_model_pairs_longer_than_max_length_are_counted_by_plan_and_all_of_them_refused(tmp_path, store):
    short = {"prompt": "Hi", "chosen": " ok", "rejected": " no"}
    long = {**short, "chosen": " ok" * 40}  # TRL's RewardTrainer leaves it out whole at max_length 24
    path = _jsonl(tmp_path / "p.jsonl", [short, long, short])
    spec = {"task": "reward-model", "train": TRAIN, "dataset": {"files": {"train": path}, "max_length": 24}}
    planned = plan(spec, store=store)
    assert planned.refused == [] and len(planned.warned) == 1
    said = re.fullmatch(
        rf"1 of the 3 rows of dataset.files.train \({re.escape(path)}\) are longer than dataset.max_length 24 tokens "
        r"\(the longest runs (\d+)\), and task reward-model's trainer leaves such rows out rather than cutting them; "
        r"raise dataset.max_length to (\d+) to keep them",
        planned.warned[0],
    )
    assert said and said[1] == said[2] and int(said[1]) > 40, planned.warned  # 40 x " ok" alone is 40 tokens or more
    spec["dataset"]["files"]["train"] = _jsonl(tmp_path / "long.jsonl", [long, long])
    with pytest.raises(LaunchError, match=r"^all 2 rows of .*, so nothing would train; raise dataset.max_length to"):
        launch(spec, store=store)
    assert store.list() == []
