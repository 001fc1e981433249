"""Loss sparklines: whole-run shape in bounded points, new bytes only, and a bounded first read."""

from __future__ import annotations

import itertools
import json

from nbtoolkit.metrics.series import METRICS_FILE
from nbtoolkit.server.sparklines import LossSparklines, ThinnedSeries


def write(directory, records, mode="a"):
    with open(directory / METRICS_FILE, mode) as handle:
        handle.writelines(json.dumps(record) + "\n" for record in records)


def test_thinned_series_keeps_evenly_spaced_points_and_ends_at_the_latest():
    series = ThinnedSeries(points=4)
    for value in range(1, 101):
        series.add(float(value))
    kept = series.snapshot()
    assert len(kept) <= 9 and kept[0] == 1.0 and kept[-1] == 100.0
    gaps = {b - a for a, b in itertools.pairwise(kept[:-1])}
    assert len(gaps) == 1  # evenly spaced before the latest point


def test_only_train_losses_count_and_later_reads_see_only_new_lines(tmp_path):
    write(
        tmp_path,
        [
            {"kind": "eval", "eval_loss": 9.0},
            {"kind": "train", "loss": 2.0},
            {"kind": "train", "learning_rate": 0.1},
            {"kind": "train", "loss": 1.0},
        ],
    )
    sparklines = LossSparklines()
    assert sparklines.loss("0a1b2c3d", tmp_path) == [2.0, 1.0]
    write(tmp_path, [{"kind": "train", "loss": 0.5}])
    assert sparklines.loss("0a1b2c3d", tmp_path) == [2.0, 1.0, 0.5]
    assert sparklines.loss("0a1b2c3d", tmp_path) == [2.0, 1.0, 0.5]


def test_an_ended_job_is_read_once_more_then_never(tmp_path):
    write(tmp_path, [{"kind": "train", "loss": 2.0}])
    sparklines = LossSparklines()
    assert sparklines.loss("0a1b2c3d", tmp_path) == [2.0]
    write(tmp_path, [{"kind": "train", "loss": 1.0}])  # written just before the job ended
    assert sparklines.loss("0a1b2c3d", tmp_path, ended=True) == [2.0, 1.0]
    (tmp_path / METRICS_FILE).unlink()
    assert sparklines.loss("0a1b2c3d", tmp_path, ended=True) == [2.0, 1.0]


def test_a_long_run_is_first_read_from_its_tail(tmp_path):
    write(tmp_path, [{"kind": "train", "loss": float(step), "step": step} for step in range(10_000)])
    sparklines = LossSparklines(first_read_bytes=4096)
    values = sparklines.loss("0a1b2c3d", tmp_path)
    assert values[-1] == 9999.0 and values[0] > 9000.0


def test_values_keep_four_significant_digits(tmp_path):
    write(tmp_path, [{"kind": "train", "loss": 0.015075376884422111}, {"kind": "train", "loss": 2}])
    assert LossSparklines().loss("0a1b2c3d", tmp_path) == [0.01508, 2.0]


def test_a_job_without_metrics_has_an_empty_line(tmp_path):
    assert LossSparklines().loss("0a1b2c3d", tmp_path) == []
