"""metrics.jsonl reading: only new bytes each time, a torn last line waits, junk lines are skipped."""

from __future__ import annotations

import json

from nbtoolkit.metrics.series import MetricsReader, Progress, read_metrics


def test_incremental_reads_and_torn_last_line(tmp_path):
    path = tmp_path / "metrics.jsonl"
    reader = MetricsReader(path)
    assert reader.read_new() == []  # no file yet
    path.write_text(json.dumps({"step": 1, "kind": "train", "loss": 2.0}) + "\n" + '{"step": 2, "ki')
    assert [record["step"] for record in reader.read_new()] == [1]
    assert reader.read_new() == []  # the torn line is not consumed
    with open(path, "a") as handle:
        handle.write('nd": "train", "loss": 1.5}\nnot json\n{"step": 3, "kind": "eval"}\n')
    assert [record["step"] for record in reader.read_new()] == [2, 3]
    assert reader.read_new() == []
    assert [record["step"] for record in read_metrics(tmp_path)] == [1, 2, 3]


def test_progress_follows_the_latest_train_record():
    progress = Progress()
    assert progress.update([{"step": 5, "max_steps": 50, "kind": "train", "loss": 2.0, "samples_per_second": 10.0}])
    assert not progress.update([])
    assert progress.update([{"step": 10, "kind": "eval", "eval_loss": 1.0}])
    assert (progress.step, progress.total_steps, progress.loss, progress.samples_per_second) == (10, 50, 2.0, 10.0)


def test_values_that_are_not_numbers_are_left_out_where_records_enter(tmp_path):
    path = tmp_path / "metrics.jsonl"
    odd = [
        {"step": "abc", "kind": "train", "loss": 1.0},
        {"step": 2, "kind": "train", "loss": {"value": 0.9}},
        {"step": "3", "kind": "train", "loss": "0.8", "learning_rate": [1e-3], "note": True},
        {"step": 4.5, "kind": 7, "stage": "predict", "eval_loss": None},
    ]
    path.write_text("".join(json.dumps(record) + "\n" for record in odd))
    reader = MetricsReader(path)
    assert reader.read_new() == [
        {"kind": "train", "loss": 1.0},
        {"step": 2, "kind": "train"},
        {"step": 3, "kind": "train", "loss": 0.8},
        {"stage": "predict", "eval_loss": None},
    ]
    assert sorted(reader.notes) == [
        f"metrics.jsonl: '{key}' values that are not numbers are left out"
        for key in ("kind", "learning_rate", "loss", "note", "step")
    ]
    progress = Progress()
    assert progress.update(read_metrics(path)) and (progress.step, progress.loss) == (3, 0.8)


def test_a_line_longer_than_any_record_is_passed_not_read_whole(tmp_path):
    from nbtoolkit.metrics.series import MAX_LINE_BYTES, MetricsReader

    path = tmp_path / "metrics.jsonl"
    good = json.dumps({"time": 1.0, "step": 1, "kind": "train", "loss": 1.0})
    path.write_text("x" * (3 * MAX_LINE_BYTES) + "\n" + good + "\n")
    reader = MetricsReader(path)
    records = []
    for _ in range(10):
        records += reader.read_new(max_bytes=1024)
    assert [record["step"] for record in records] == [1] and reader.offset == path.stat().st_size
    assert any("over" in note for note in reader.notes)
