"""The log parser on real captured Trainer output, odd chunking, rank prefixes and junk."""

from __future__ import annotations

from nbtoolkit.metrics.parse import LogParser, classify, parse_dict_line
from tests.conftest import DATA


def parse_all(text: str, chunk: int | None = None) -> list[dict]:
    parser = LogParser(clock=lambda: 0.0)
    pieces = [text] if chunk is None else [text[i:i + chunk] for i in range(0, len(text), chunk)]
    records = [record for piece in pieces for record in parser.feed(piece)]
    return records + parser.flush()


def kinds(records):
    return [record["kind"] for record in records]


def test_transformers5_string_values_with_tqdm():
    records = parse_all((DATA / "trainer_v5_tqdm.log").read_text())
    assert kinds(records) == ["train", "train", "eval", "train", "train", "eval", "summary"]
    assert records[0]["loss"] == 1.785 and records[0]["learning_rate"] == 0.0024 and records[0]["epoch"] == 0.25
    assert records[2]["eval_accuracy"] == 0.1625
    assert records[-1]["train_runtime"] == 0.7082 and records[-1]["train_loss"] == 1.795
    # steps come from the outer progress bar (never the nested eval bar) and never go backwards
    steps = [record["step"] for record in records]
    assert steps == sorted(steps) and steps[-1] == 20 and all(record["max_steps"] == 20 for record in records)


def test_transformers5_without_progress_bar_counts_logs():
    records = parse_all((DATA / "trainer_v5_plain.log").read_text())
    assert kinds(records) == ["train", "train", "eval", "train", "train", "eval", "summary"]
    assert [record["step"] for record in records if record["kind"] == "train"] == [1, 2, 3, 4]


def test_transformers4_float_values():
    records = parse_all((DATA / "trainer_v4_tqdm.log").read_text())
    assert kinds(records).count("train") == 4 and kinds(records)[-1] == "summary"
    assert isinstance(records[0]["loss"], float) and records[0]["loss"] > 1.0
    assert records[-1]["train_samples_per_second"] > 0


def test_chunking_does_not_change_the_result():
    text = (DATA / "trainer_v5_tqdm.log").read_text()
    whole = parse_all(text)
    assert parse_all(text, chunk=7) == whole
    assert parse_all(text, chunk=1) == whole


def test_rank_prefixes_keep_rank_zero_only():
    text = ("[rank1]: {'loss': '9.9', 'epoch': '0.1'}\n"
            "[rank0]: {'loss': '2.5', 'learning_rate': '1e-05', 'epoch': '0.1'}\n"
            "[default1]:{'loss': 8.0, 'epoch': 0.2}\n"
            "[default0]:{'loss': 2.25, 'epoch': 0.2}\n")
    assert [record["loss"] for record in parse_all(text)] == [2.5, 2.25]


def test_nan_loss_is_kept_as_null_and_junk_is_ignored():
    text = "random {not a dict}\n{'foo': 1}\n{'loss': 'nan', 'epoch': '1.0'}\n\x00\xff garbage {'\n"
    records = parse_all(text)
    assert len(records) == 1 and records[0]["loss"] is None


def test_classify_and_dict_line():
    assert parse_dict_line("no dict here") is None
    assert classify({"loss": 1.0, "train_runtime": 3.0}) == "train"  # transformers 5 with token counting
    assert classify({"train_runtime": 3.0, "train_loss": 1.0}) == "summary"
    assert classify({"eval_loss": 1.0}) == "eval"
    assert classify({"grad_norm": 1.0}) is None


def test_nbtoolkit_progress_lines_give_the_step_and_window_throughput():
    text = ("[nbtoolkit] step 20/150 (13%) | loss 1.5320 | lr 4.00e-05 | 12.5 samples/s | 1600 tokens/s | eta 0:12\n"
            "{'loss': '1.532', 'learning_rate': '4e-05', 'epoch': '0.2'}\n"
            "{'eval_loss': '1.4', 'eval_accuracy': '0.5', 'epoch': '0.2'}\n")
    train, evaluation = parse_all(text)
    assert (train["step"], train["max_steps"], train["samples_per_second"], train["tokens_per_second"]) == \
        (20, 150, 12.5, 1600.0)
    assert evaluation["step"] == 20 and "samples_per_second" not in evaluation
