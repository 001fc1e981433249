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
