"""Steady-state throughput leaves warm-up windows out and weights windows by their length."""

from nbtoolkit.metrics.throughput import steady_state


def window(step, sps, seconds, tps=None):
    record = {"kind": "train", "step": step, "samples_per_second": sps, "window_seconds": seconds}
    return record | ({"tokens_per_second": tps} if tps else {})


def test_first_window_is_warmup_by_default():
    records = [
        window(10, 5.0, 20.0, 50.0),
        window(20, 100.0, 1.0, 1000.0),
        window(30, 50.0, 2.0, 500.0),
        {"kind": "eval", "step": 30, "eval_loss": 1.0},
    ]
    result = steady_state(records)
    assert result.windows == 2 and result.warmup_seconds == 20.0 and result.steady_seconds == 3.0
    assert result.samples_per_second == (100.0 * 1 + 50.0 * 2) / 3
    assert result.tokens_per_second == (1000.0 * 1 + 500.0 * 2) / 3


def test_explicit_warmup_and_edge_cases():
    records = [window(10, 5.0, 20.0), window(20, 100.0, 1.0), window(30, 50.0, 2.0)]
    assert steady_state(records, warmup_steps=20).samples_per_second == 50.0
    assert steady_state(records, warmup_steps=100).samples_per_second == 50.0  # never empty: the last window
    assert steady_state([]).samples_per_second is None
    assert steady_state(records).tokens_per_second is None
