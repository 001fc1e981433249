"""Property tests: the log parser and the metrics reader take whatever a program printed, and never raise."""

from __future__ import annotations

import json
import math

from hypothesis import given, settings
from hypothesis import strategies as st

from nbtoolkit.metrics.parse import LogParser
from nbtoolkit.metrics.series import MetricsReader, parse_lines

# pieces of real Trainer / torchrun / tqdm output, so generated text often comes close to parsing
FRAGMENTS = st.sampled_from(
    [
        "{",
        "}",
        "'loss': ",
        "'eval_loss': ",
        "'learning_rate': ",
        "'train_runtime': ",
        "'epoch': ",
        "'",
        '"',
        ": ",
        ", ",
        "nan",
        "inf",
        "-inf",
        "1.5e-3",
        "4.766",
        ".",
        "1" * 5000,
        "[rank1]:",
        "[rank0]:",
        "[default0]:",
        "[1,0]<stdout>:",
        " 12/120 [00:03<00:30,  3.51it/s]",
        "/",
        " [00:01<00:02, ",
        "it/s]",
        "s/it]",
        "..",
        "?",
        "\r",
        "\n",
        "\r\n",
        "\x1b[A",
        "\x00",
        "\ufffd",
        "é",
        "%|",
        "█",
    ]
)
LOG_TEXT = st.lists(st.one_of(FRAGMENTS, st.text(max_size=20)), max_size=60).map("".join)


def check_records(records: list[dict]) -> None:
    """Every record is what metrics.jsonl promises: JSON-safe, with a kind, a step (null when unknown) and a time."""
    for record in records:
        assert record["kind"] in ("train", "eval", "summary")
        assert (record["step"] is None or isinstance(record["step"], int)) and isinstance(record["time"], float)
        json.dumps(record, allow_nan=False)  # NaN/inf became null


@settings(max_examples=200, deadline=None)
@given(LOG_TEXT, st.lists(st.integers(min_value=1, max_value=50), max_size=8))
def test_parser_takes_any_text_in_any_chunking(text, cuts):
    parser = LogParser()
    pieces, start = [], 0
    for cut in cuts:
        pieces.append(text[start : start + cut])
        start += cut
    pieces.append(text[start:])
    records = [record for piece in pieces for record in parser.feed(piece)] + parser.flush()
    check_records(records)


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=2000))
def test_parser_takes_any_bytes_decoded_as_the_supervisor_does(data):
    parser = LogParser()
    check_records(parser.feed(data.decode("utf-8", errors="replace")) + parser.flush())


@settings(max_examples=150, deadline=None)
@given(st.lists(st.one_of(LOG_TEXT, st.text()), max_size=20))
def test_parser_takes_any_lines(lines):
    parser = LogParser()
    check_records(parser.feed("\n".join(lines) + "\n"))


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=2000))
def test_metrics_reader_takes_any_bytes(data):
    records = parse_lines(data)
    assert all(isinstance(record, dict) for record in records)


def test_metrics_reader_skips_a_line_nested_too_deep(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_bytes(b"[" * 100_000 + b"\n" + json.dumps({"kind": "train", "step": 1}).encode() + b"\n")
    assert MetricsReader(path).read_new() == [{"kind": "train", "step": 1}]


def test_huge_numbers_and_odd_rates_do_not_break_a_real_line():
    parser = LogParser(clock=lambda: 0.0)
    text = (
        "1" * 5000 + "/2 [00:00<00:00, ...it/s]\n"
        "[rank" + "0" * 5000 + "]: {'loss': '1e999', 'learning_rate': '0.001'}\n"
        " 3/10 [00:01<00:02, 2.5it/s]{'loss': '0.5', 'epoch': '0.3'}\n"
    )
    records = parser.feed(text) + parser.flush()  # the last waits for the bar redrawn after it, or the end
    assert records[-1]["loss"] == 0.5 and records[-1]["step"] == 3 and records[-1]["max_steps"] == 10
    assert all(
        value is None or not isinstance(value, float) or math.isfinite(value)
        for record in records
        for value in record.values()
    )


def test_steps_come_from_nbtoolkit_progress_lines_in_a_replayed_job_log():
    parser = LogParser(clock=lambda: 0.0)
    records = parser.feed(
        "[nbtoolkit] step 5/40 (12%) | loss 1.7954 | lr 2.70e-03\n"
        "{'loss': '1.795', 'learning_rate': '0.0027', 'epoch': '0.06667'}\n"
        "[nbtoolkit] step 10/40 (25%) | loss 1.7977\n"
        "{'loss': '1.798', 'learning_rate': '0.002325', 'epoch': '0.1333'}\n"
    )
    assert [(record["step"], record["max_steps"]) for record in records] == [(5, 40), (10, 40)]
