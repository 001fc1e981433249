"""Downsampled metrics keep what a chart must show, for any run: every kind's lowest and highest loss (when the
read is whole), the last record, the order, and a size bounded by the points asked for, not by the file."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from nbtoolkit.metrics.series import downsample, read_metrics

record = st.one_of(
    st.builds(lambda loss: {"kind": "train", "loss": loss}, st.floats(-1e6, 1e6)),
    st.builds(lambda loss: {"kind": "eval", "eval_loss": loss}, st.floats(-1e6, 1e6)),
    st.just({"kind": "summary", "train_runtime": 1.0}),
    st.builds(lambda text: {"kind": "train", "loss": text}, st.sampled_from(["4.766", "nan", "x"])),
)


def write(records: list[dict], torn: str) -> Path:
    path = Path(tempfile.mkdtemp()) / "metrics.jsonl"
    with open(path, "w") as handle:
        for step, item in enumerate(records, start=1):
            handle.write(json.dumps({"step": step, **item}) + "\n")
        handle.write(torn)  # a line still being written
    return path


@settings(max_examples=100, deadline=None)
@given(st.lists(record, min_size=1, max_size=300), st.integers(1, 40), st.sampled_from(["", '{"step": 9', "{"]))
def test_a_whole_read_keeps_extremes_last_and_order_within_the_bound(records, buckets, torn):
    path = write(records, torn)
    kept, end = downsample(path, 0, buckets, budget_bytes=1 << 20)
    every = read_metrics(path)
    assert end == path.stat().st_size - len(torn)
    steps = [item["step"] for item in kept]
    assert steps == sorted(set(steps))  # in file order, none twice
    assert kept[-1]["step"] == every[-1]["step"]
    assert len(kept) <= buckets * 3 * 3  # three kinds at most
    for kind, key in (("train", "loss"), ("eval", "eval_loss")):
        values = [item[key] for item in every if item.get("kind") == kind and isinstance(item.get(key), float)]
        values = [value for value in values if value == value]  # NaN is no extreme
        shown = [item[key] for item in kept if item.get("kind") == kind and key in item]
        if values:
            assert min(values) in shown and max(values) in shown


@settings(max_examples=40, deadline=None)
@given(st.lists(record, min_size=50, max_size=300), st.integers(2, 20), st.integers(1, 3000))
def test_a_windowed_read_stays_within_its_budget_and_ends_at_the_last_record(records, buckets, budget):
    path = write(records, "")
    kept, end = downsample(path, 0, buckets, budget_bytes=budget)
    every = read_metrics(path)
    assert end == path.stat().st_size and kept and kept[-1]["step"] == every[-1]["step"]
    assert len(kept) <= buckets * 3 * 3


def _bytes_read() -> int:
    """What this process has read so far (Linux: read() calls of any file)."""
    return int(Path("/proc/self/io").read_text().split("rchar:")[1].split()[0])


def test_a_line_longer_than_the_budget_is_skipped_not_scanned_once_per_bucket(tmp_path):
    """A user's record of 3 MB (150 MB took 2.8 s): each bucket landing in it scanned up to 1 MiB for its end."""
    path = tmp_path / "metrics.jsonl"
    with open(path, "w") as handle:
        for step in range(1, 201):
            handle.write(json.dumps({"step": step, "kind": "train", "loss": 1.0 / step}) + "\n")
            if step == 100:
                handle.write(json.dumps({"step": 0, "kind": "train", "note": "a" * 3_000_000}) + "\n")
    budget = 64 * 1024
    before = _bytes_read()
    kept, end = downsample(path, 0, 20, budget_bytes=budget)
    # windows and line ends (a budget each), the last line's start (1 MiB back), buffered reads: not 17 MB as before
    assert _bytes_read() - before < 2 * 1024 * 1024
    assert end == path.stat().st_size and kept[0]["step"] == 1 and kept[-1]["step"] == 200
    assert all("note" not in item for item in kept)
