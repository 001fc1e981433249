"""The fallback parser on real logs pasted in public issues and guides (tests/data/*.log, each with its .source),
whole and cut in random chunks. Expectations are read off the log text by hand: the step is the one a training bar
shows for the dict, and null where no bar shows one."""

from __future__ import annotations

from itertools import pairwise

from hypothesis import given, settings
from hypothesis import strategies as st

from nbtoolkit.metrics.parse import LogParser
from tests.conftest import DATA

#: per log: (kind, step, max_steps, loss or eval_loss, epoch) of each record, written from the log text
EXPECTED = {
    # `  4% 100/2238 [...]{'loss': 2.6446, ...}`: a log file's bar (no glyphs, one line per step at 71 s/it) with the
    # dict glued to its end, among pod-prefixed lines; the total steps appear only in the bar
    "k8s_gptj_deepspeed_nontty.log": [("train", 100, 2238, 2.6446, 0.04)],
    # a complete bar with an eval dict glued to it and no train record anywhere: it may be the evaluation's own bar,
    # so no step (the dict at epoch 49.41 cannot be at step 850 of 850 anyway)
    "trainer_eval_glued_to_bar.log": [
        ("eval", None, None, 0.6620487570762634, 49.41),
        ("eval", None, None, 0.6605485081672668, 50.0),
    ],
    # three dicts before any bar; the bar at 1999/24128 (3.33 s/it, drawn at every step) with DeepSpeed's own line
    # glued to it; the dict after it is at 1999; the next one has no bar of its own
    "deepspeed_t5_11b_tqdm.log": [
        ("train", None, None, 6.2645, 0.02),
        ("train", None, None, 0.0, 0.04),
        ("train", None, None, 0.0, 0.06),
        ("train", 1999, 24128, 0.0, 0.08),
        ("train", None, 24128, 0.0, 0.1),
    ],
    # dict lines only: eight losses, no step shown
    "llava_finetune_no_bar.log": [
        ("train", None, None, loss, 0.01) for loss in (5.8945, 6.1094, 5.9219, 5.8203, 5.8984, 5.9375, 5.9531, 5.9648)
    ],
}
LOGS = {name: (DATA / name).read_text() for name in EXPECTED}


def parse(text: str, cuts: list[int] | None = None) -> list[dict]:
    parser = LogParser(clock=lambda: 0.0)
    bounds = [0, *sorted(cuts or []), len(text)]
    records = [record for start, end in pairwise(bounds) for record in parser.feed(text[start:end])]
    return records + parser.flush()


def summary(records: list[dict]) -> list[tuple]:
    return [
        (r["kind"], r["step"], r.get("max_steps"), r.get("loss", r.get("eval_loss")), r.get("epoch")) for r in records
    ]


def test_every_real_log_reads_as_its_text_shows():
    for name, expected in EXPECTED.items():
        assert summary(parse(LOGS[name])) == expected, name
        assert (DATA / f"{name}.source").read_text().startswith("https://github.com/"), name


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(sorted(EXPECTED)), st.lists(st.floats(min_value=0, max_value=1), max_size=12))
def test_every_real_log_reads_the_same_in_random_chunks(name, where):
    text = LOGS[name]
    assert parse(text, [int(at * len(text)) for at in where]) == parse(text)


def test_a_prefixed_bar_is_the_training_bar_and_a_described_one_is_not():
    """Prefixes a launcher or log collector adds (host, pod, time, bracketed source); `Map:` is a description."""
    for prefix in (
        "worker-0: ",
        "algo-1: ",
        "localhost: ",
        "2024-05-01T10:00:00.123Z ",
        "[1,mpirank:0,algo-1]<stderr>:",
    ):
        text = f"{prefix}  4% 100/2238 [1:49:59<42:08:58, 70.97s/it]{{'loss': 2.6446, 'epoch': 0.04}}\n"
        assert summary(parse(text)) == [("train", 100, 2238, 2.6446, 0.04)], prefix
    described = "Map:  50% 200/400 [00:01<00:01, 150.2it/s]\n{'loss': 1.5, 'epoch': 0.1}\n"
    assert summary(parse(described)) == [("train", None, None, 1.5, 0.1)]


def test_an_eval_under_a_running_training_bar_takes_its_step_and_an_eval_only_log_none():
    """Logging off, evaluation on: the training bar (40%, not complete) gives the eval its step; an evaluation's
    own bar (complete when its dict prints) never does."""
    during = "  40% 400/1000 [01:00<01:30, 6.6it/s]\n  50% 21/42 [00:01<00:01, 20.1it/s]\n 100% 42/42 [00:02<00:00, 20.1it/s]\n"
    assert summary(parse(during + "{'eval_loss': 0.5, 'epoch': 0.4}\n")) == [("eval", None, None, 0.5, 0.4)]
    running = "  40% 400/1000 [01:00<01:30, 6.6it/s]{'eval_loss': 0.5, 'epoch': 0.4}\n"
    assert summary(parse(running)) == [("eval", 400, 1000, 0.5, 0.4)]
