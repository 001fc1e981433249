"""The data before training: `preview_data` on the bundled samples of all four tasks, against counts and
token lengths worked out here (json rows, the `tokenizers` library on the bundled tokenizer.json)."""

from __future__ import annotations

import json
import math
import re
import statistics
import subprocess
from collections import Counter
from pathlib import Path

import pytest
import yaml
from tokenizers import Tokenizer

import nbtoolkit
from nbtoolkit.inputs.data_preview import DEFAULT_ROWS, TokenLengths, preview_data
from nbtoolkit.train.errors import TrainError
from tests.conftest import PYTHON
from tests.test_task_parts import task_setup

ASSETS = Path(nbtoolkit.__file__).parent / "assets"


def train_rows(task: str) -> list[dict]:
    lines = (ASSETS / "data" / task / "train.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines[:DEFAULT_ROWS]]


def token_counts(tokenizer: str, *texts: list[str]) -> list[int]:
    """Lengths with special tokens, straight from the tokenizers library (not transformers, not our code)."""
    encoder = Tokenizer.from_file(str(ASSETS / "tokenizers" / tokenizer / "tokenizer.json"))
    return [len(encoder.encode(*parts).ids) for parts in zip(*texts, strict=False)]


def share_longer(lengths: list[int], cut: int) -> float:
    return len([n for n in lengths if n > cut]) / len(lengths)


def test_summarization_lengths_cut_share_and_suggestions():
    template = "Summarize the following news article:\n{input}\nSummary:\n"
    report = preview_data(
        {"task": "summarization", "dataset": {"prompt_template": template, "max_length": 80, "max_target_length": 20}}
    )
    rows = train_rows("summarization")
    sources = token_counts("sentencepiece-style", [template.replace("{input}", row["article"]) for row in rows])
    targets = token_counts("sentencepiece-style", [row["highlights"] for row in rows])
    source, target = report.lengths

    assert report.sample_size == len(rows) == 320
    assert report.columns == ["article", "highlights"]
    assert report.used == {"text_column": "article", "summary_column": "highlights"}
    assert report.rows == rows[:5]
    assert report.label_counts is None
    assert sorted(source.lengths) == sorted(sources)
    assert (source.field, source.cut_at) == ("dataset.max_length", 80)
    assert source.cut_share == share_longer(sources, 80) > 0
    assert source.suggested == min(max(sources), 512)  # the longest prompted article, within the tokenizer's 512
    assert (target.field, target.cut_at) == ("dataset.max_target_length", 20)
    assert target.cut_share == share_longer(targets, 20) > 0
    # the tutorial's 95th percentile (numpy's linear one = statistics' inclusive method), rounded down
    assert target.suggested == math.floor(statistics.quantiles(targets, n=20, method="inclusive")[18])
    assert "suggested dataset.max_target_length" in str(report)


def test_classification_label_counts_and_pair_free_lengths():
    report = preview_data({"task": "text-classification", "dataset": {"max_length": 12}})
    rows = train_rows("text-classification")
    lengths = token_counts("wordpiece", [row["text"] for row in rows])

    assert report.sample_size == DEFAULT_ROWS < 1200  # the first rows only, not the whole file
    assert report.label_counts == dict(Counter(row["label"] for row in rows))
    assert sum(report.label_counts.values()) == DEFAULT_ROWS
    assert sorted(report.lengths[0].lengths) == sorted(lengths)
    assert report.lengths[0].cut_share == share_longer(lengths, 12) > 0
    assert report.lengths[0].suggested == max(lengths)
    text = str(report)
    assert "label counts: " in text and all(f"{label} {count}" in text for label, count in report.label_counts.items())


def test_question_answering_measures_question_and_context_together():
    report = preview_data({"task": "question-answering"})
    rows = train_rows("question-answering")
    lengths = token_counts("wordpiece", [row["question"] for row in rows], [row["context"] for row in rows])

    assert sorted(report.lengths[0].lengths) == sorted(lengths)
    assert report.lengths[0].cut_share == share_longer(lengths, 128) == 1.0
    assert "windows" in report.note  # longer examples are split, not cut


def test_causal_lm_counts_nonempty_texts_and_cuts_nothing():
    report = preview_data({"task": "causal-lm"})
    rows = [row for row in train_rows("causal-lm") if row["text"].strip()]
    lengths = token_counts("byte-bpe", [row["text"] for row in rows])

    assert sorted(report.lengths[0].lengths) == sorted(lengths)
    assert report.lengths[0].cut_share is None and report.lengths[0].suggested is None
    assert "nothing is cut" in report.note


def test_local_files_and_max_train_samples(tmp_path):
    path = tmp_path / "train.jsonl"
    path.write_text("".join(json.dumps({"body": f"text number {n}", "tag": "ab"[n % 2]}) + "\n" for n in range(9)))
    report = preview_data(
        {
            "task": "text-classification",
            "dataset": {
                "files": {"train": str(path)},
                "text_column": "body",
                "label_column": "tag",
                "max_train_samples": 7,
            },
        }
    )

    assert report.sample_size == 7
    assert report.label_counts == {"a": 4, "b": 3}
    assert report.used == {"text_column": "body", "label_column": "tag"}
    assert str(path) in report.origin


def test_wrong_mapping_is_the_training_programs_sentence():
    with pytest.raises(TrainError) as caught:
        preview_data({"task": "summarization", "dataset": {"summary_column": "summary"}})
    assert str(caught.value) == (
        "dataset.summary_column 'summary' is not a column of the data; its columns are article, highlights"
    )


def test_hub_dataset_is_streamed_not_downloaded(monkeypatch):
    """The hub loader is substituted (tests never reach the hub): it must be asked for a stream of the train split,
    and only the sample's rows may be read from it."""
    from datasets import ClassLabel, Features, IterableDataset, Value

    calls, produced = [], []

    def endless():
        for n in range(10**6):
            produced.append(n)
            yield {"text": f"row {n}", "label": n % 2}

    def fake_load_dataset(*args, **kwargs):
        calls.append((args, kwargs))
        features = Features({"text": Value("string"), "label": ClassLabel(names=["sad", "happy"])})
        return IterableDataset.from_generator(endless, features=features)

    monkeypatch.setattr("nbtoolkit.train.data.load_dataset", fake_load_dataset)
    report = preview_data({"task": "text-classification", "dataset": {"name": "someone/emotions"}}, rows=25)

    assert calls == [(("someone/emotions", None), {"split": "train", "streaming": True})]
    assert report.sample_size == 25 and len(produced) < 100
    assert report.label_counts == {"sad": 13, "happy": 12}  # the hub's ClassLabel names, kept
    assert "streamed" in report.origin


def test_histogram_bins_cover_every_length_once():
    lengths = TokenLengths("source", "dataset.max_length", [3, 4, 4, 9, 12, 30], cut_at=10, suggested=30)
    bins = lengths.histogram(bins=4)

    assert bins == [(3, 10, 4), (10, 17, 1), (17, 24, 0), (24, 31, 1)]
    assert lengths.cut_share == 2 / 6
    assert lengths.quantiles() == {"min": 3, "median": 6, "p95": 25, "max": 30}


def nbtoolkit_data(*args):
    return subprocess.run([PYTHON, "-m", "nbtoolkit.cli", "data", *args], capture_output=True, text=True, timeout=180)


def test_cli_prints_the_report(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump({"task": "summarization", "dataset": {"max_target_length": 20}}))
    result = nbtoolkit_data(str(spec))
    targets = token_counts("sentencepiece-style", [row["highlights"] for row in train_rows("summarization")])

    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "summarization: 320 examples from the bundled summarization sample"
    assert "columns used: dataset.text_column -> article, dataset.summary_column -> highlights" in lines
    assert f"  dataset.max_target_length 20: {share_longer(targets, 20):.1%} of examples are longer" in lines
    target = "\n".join(lines[next(n for n, line in enumerate(lines) if line.startswith("target tokens")) :])
    bars = re.findall(r"^ +(\d+)-(\d+) +#* +(\d+)( <- cut)?$", target, flags=re.MULTILINE)
    assert sum(int(count) for _, _, count, _ in bars) == 320
    assert [(int(low), int(high)) for low, high, _, cut in bars if cut] == [(19, 20)]  # the bin holding 20
    assert result.stderr == ""  # no progress bars, no warnings


def test_cli_bad_mapping_and_bad_spec_are_one_sentence_exit_2(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump({"task": "text-classification", "dataset": {"label_column": "emotion"}}))
    wrong = nbtoolkit_data(str(spec))
    assert wrong.returncode == 2 and wrong.stdout == ""
    assert (
        wrong.stderr
        == "nbtoolkit: dataset.label_column 'emotion' is not a column of the data; its columns are text, label\n"
    )

    spec.write_text(yaml.safe_dump({"task": "translation"}))
    bad = nbtoolkit_data(str(spec))
    assert bad.returncode == 2 and len(bad.stderr.splitlines()) == 1 and bad.stderr.startswith("nbtoolkit: ")
    assert "Traceback" not in bad.stderr and "RunSpec" not in bad.stderr


def test_a_model_that_cannot_do_the_task_is_the_programs_sentence():
    with pytest.raises(TrainError, match="gpt2 decoder-only model, but task .summarization. needs an encoder-decoder"):
        preview_data({"task": "summarization", "model": "nbtoolkit/tiny-gpt2"})


def test_an_empty_training_split_is_one_sentence(tmp_path):
    path = tmp_path / "train.jsonl"
    path.write_text(json.dumps({"text": "", "label": "a"}) + "\n")
    with pytest.raises(TrainError, match="^dataset.text_column 'text' holds only empty texts in the first 1 examples$"):
        preview_data({"task": "causal-lm", "dataset": {"files": {"train": str(path)}}})


def test_a_hub_dataset_out_of_reach_is_the_programs_sentence():
    """Offline (conftest): the streaming load fails as the training program's full load does."""
    spec = {"task": "text-classification", "dataset": {"name": "philschmid/emotion"}}
    with pytest.raises(TrainError) as caught:
        preview_data(spec)
    with pytest.raises(TrainError) as program:
        task_setup(spec)
    assert str(caught.value) == str(program.value)
    assert str(caught.value).startswith("dataset.name 'philschmid/emotion' could not be loaded")
