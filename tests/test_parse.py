"""The log parser on real captured Trainer output, odd chunking, rank prefixes and junk."""

from __future__ import annotations

import pytest

from nbtoolkit.metrics.parse import MAX_PENDING_CHARS, LogParser, classify, parse_dict_line
from tests.conftest import DATA


def parse_all(text: str, chunk: int | None = None) -> list[dict]:
    parser = LogParser(clock=lambda: 0.0)
    pieces = [text] if chunk is None else [text[i : i + chunk] for i in range(0, len(text), chunk)]
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


def test_without_a_progress_bar_the_step_is_unknown_not_a_record_count():
    records = parse_all((DATA / "trainer_v5_plain.log").read_text())
    assert kinds(records) == ["train", "train", "eval", "train", "train", "eval", "summary"]
    assert [record["step"] for record in records] == [None] * 7
    assert [record["epoch"] for record in records if record["kind"] == "train"] == [0.25, 0.5, 0.75, 1.0]


def bar(step: int, total: int, rate: str = "25.1it/s", label: str = "") -> str:
    """A tqdm bar as the Trainer draws it (no label), or another bar (`Map`, `Writing model shards`)."""
    filled = "█" * (10 * step // total)
    return (
        f"{label + ': ' if label else ''}{100 * step // total:3d}%|{filled:<10}| {step}/{total} [00:01<00:02, {rate}]"
    )


def trainer_log(logged_steps: list[int], total: int, stale_by: int) -> str:
    """What transformers writes at 25 steps/s: the bar redrawn only now and then (stale by a few steps), then
    tqdm.write's clear, the dict line, and the bar redrawn at the current step."""
    text = "\r" + bar(0, total, "?it/s")
    for step in logged_steps:
        text += "\r" + bar(step - stale_by, total) + "\r" + " " * 40 + "\r"
        text += f"{{'loss': '{1 + 1 / step:.4g}', 'grad_norm': '1.5', 'learning_rate': '0.0004', 'epoch': '{step / total}'}}\n"
        text += "\r" + bar(step, total)
    return text


def test_records_take_the_step_of_the_bar_redrawn_after_them_not_a_stale_one():
    records = parse_all(trainer_log([5, 10, 15], total=60, stale_by=2))
    assert [record["step"] for record in records] == [5, 10, 15]
    assert parse_all(trainer_log([5, 10, 15], total=60, stale_by=2), chunk=3) == records


def test_other_bars_never_set_the_training_step():
    """Data processing before training, the evaluation bar after it, and the checkpoint writer's bar at the end."""
    text = (
        "Map: 100%|██████████| 400/400 [00:00<00:00, 4010.19 examples/s]\n"
        + bar(1, 7, label="Map")
        + "\n"
        + trainer_log([5, 10], total=10, stale_by=1)
        + "\r"
        + bar(7, 7)
        + "\n"  # trainer.evaluate() after training: 7 batches
        + "{'train_runtime': '2.1', 'train_samples_per_second': '76.2', 'train_steps_per_second': '4.7', "
        "'train_loss': '1.3', 'epoch': '1'}\n"
        + bar(1, 1, "6.1it/s", label="Writing model shards")
        + "\n"
        + "{'eval_loss': '1.2', 'eval_runtime': '0.3', 'epoch': '1'}\n"
    )
    records = parse_all(text)
    assert [(record["kind"], record["step"], record["max_steps"]) for record in records] == [
        ("train", 5, 10),
        ("train", 10, 10),
        ("summary", 10, 10),
        ("eval", 10, 10),
    ]
    assert records[2]["samples_per_second"] == 76.2


def test_a_printed_log_history_is_not_a_record():
    text = (
        "[{'loss': 2.1, 'grad_norm': 1.1, 'learning_rate': 0.0004, 'epoch': 0.5, 'step': 5}, "
        "{'eval_loss': 2.0, 'eval_runtime': 0.2, 'epoch': 0.5, 'step': 5}]\n"
        "[ {'loss': 2.1, 'step': 5} ]\n"
    )
    assert parse_all(text) == []


def test_a_dicts_own_step_is_its_step_as_a_whole_number():
    records = parse_all("{'step': 40, 'loss': 0.8}\n{'step': 45.0, 'loss': 0.7}\n{'step': 2.5, 'loss': 0.6}\n")
    assert [record["step"] for record in records] == [40, 45, None]
    assert all(isinstance(record["step"], int) for record in records[:2])


def test_two_ranks_glued_on_one_line_are_parsed_per_rank():
    text = (
        trainer_log([5], total=60, stale_by=0).replace("{'loss'", "[rank0]:{'loss'")
        + "\n[rank1]: {'loss': '9.9', 'epoch': '0.1'}[rank0]:{'loss': '2.5', 'learning_rate': '1e-05', "
        "'epoch': '0.1'}\n[rank1]:" + bar(10, 60) + "\r[rank0]:" + bar(10, 60) + "\n"
    )
    records = parse_all(text)
    assert [(record["step"], record["loss"]) for record in records] == [(5, 1.2), (10, 2.5)]


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
    text = (
        "[rank1]: {'loss': '9.9', 'epoch': '0.1'}\n"
        "[rank0]: {'loss': '2.5', 'learning_rate': '1e-05', 'epoch': '0.1'}\n"
        "[default1]:{'loss': 8.0, 'epoch': 0.2}\n"
        "[default0]:{'loss': 2.25, 'epoch': 0.2}\n"
    )
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
    text = (
        "[nbtoolkit] step 20/150 (13%) | loss 1.5320 | lr 4.00e-05 | 12.5 samples/s | 1600 tokens/s | eta 0:12\n"
        "{'loss': '1.532', 'learning_rate': '4e-05', 'epoch': '0.2'}\n"
        "{'eval_loss': '1.4', 'eval_accuracy': '0.5', 'epoch': '0.2'}\n"
    )
    train, evaluation = parse_all(text)
    assert (train["step"], train["max_steps"], train["samples_per_second"], train["tokens_per_second"]) == (
        20,
        150,
        12.5,
        1600.0,
    )
    assert evaluation["step"] == 20 and "samples_per_second" not in evaluation


NON_TTY_BAR = "  4% 100/2238 [1:49:59<42:08:58, 70.97s/it]"


@pytest.mark.parametrize(
    "prefix",
    ["trainer-1  | ", "pod-0 | ", "trainer-0 main ", "2024-05-01 10:00:00 pod-0 | ", "INFO:root:"],
    ids=["docker-compose", "compose-pod", "stern", "time-and-pod", "logging"],
)
def test_a_bar_behind_any_collector_prefix_gives_the_step(prefix):
    """What collectors put before a line (hand-checked: the bar says step 100 of 2238); a description still rules
    a bar out."""
    text = f"{prefix}{NON_TTY_BAR}\n{prefix}{{'loss': 1.5}}\n"
    for chunk in (None, 3):
        (record,) = parse_all(text, chunk)
        assert (record["kind"], record["step"], record["max_steps"], record["loss"]) == ("train", 100, 2238, 1.5)
    (record,) = parse_all(f"{prefix}Map:  40% 20/50 [00:01<00:01, 9.00it/s]\n{prefix}{{'loss': 1.5}}\n")
    assert record["step"] is None


def test_before_the_first_train_dict_a_partly_drawn_eval_bar_gives_an_eval_record_no_step():
    """Training is at 5 of 100 when an evaluation's bar (20 of 50) is last drawn: step 20 is not in the log."""
    for text in (
        "  5% 5/100 [00:05<01:30,  1.00s/it]\n 40% 20/50 [00:02<00:03,  9.00it/s]\n{'eval_loss': 0.5, 'epoch': 0.05}\n",
        "  0% 0/100 [00:00<?, ?it/s]\n 98% 49/50 [00:05<00:00,  9.00it/s]\n{'eval_loss': 0.5, 'epoch': 0}\n",
    ):
        (record,) = parse_all(text)
        assert (record["kind"], record["step"], record.get("max_steps")) == ("eval", None, None)
    # with only the training bar drawn (a terminal's eval bar moves the cursor and is ignored), it is the step
    (record,) = parse_all("  0% 0/100 [00:00<?, ?it/s]\n{'eval_loss': 0.5, 'epoch': 0}\n")
    assert (record["step"], record["max_steps"]) == (0, 100)


def plain_bar(step: int, total: int, elapsed_s: int, rate: str = "1.00s/it") -> str:
    """A bar as a log without a terminal keeps it (Colab, Kubernetes): no glyphs, one drawing per line."""
    return f"{100 * step // total:3d}% {step}/{total} [{elapsed_s // 60:02d}:{elapsed_s % 60:02d}<01:40, {rate}]"


def test_an_evaluation_bar_of_the_training_bars_total_never_gives_the_step():
    """50 steps, logging and evaluating every 10, the eval set also 50 batches: the eval bar (no description,
    like the training bar) runs 0/50 to 50/50 after each train dict; every record keeps the training step."""
    lines = []
    for step in range(1, 51):
        lines.append(plain_bar(step, 50, elapsed_s=2 * step))
        if step % 10 == 0:
            lines.append(f"{{'loss': {2 - step / 50:.2f}, 'learning_rate': 1e-05, 'epoch': {step / 50:.2f}}}")
            if step < 50:
                lines += [plain_bar(batch, 50, elapsed_s=batch // 20, rate="40.00it/s") for batch in range(51)]
                lines.append(f"{{'eval_loss': {2 - step / 50:.2f}, 'eval_runtime': 1.2, 'epoch': {step / 50:.2f}}}")
    text = "\n".join(lines) + "\n"
    expected = [(kind, step) for step in (10, 20, 30, 40) for kind in ("train", "eval")] + [("train", 50)]
    for chunk in (None, 7):
        assert [(record["kind"], record["step"]) for record in parse_all(text, chunk)] == expected


def test_a_run_resumed_in_the_same_log_takes_its_steps_from_the_resumed_bar():
    """A run reaches 60/100 and dies; the job resumes from its step-50 checkpoint and appends to the same log
    (a restarted pod, a spot restart): the resumed run's records at 55 and 60 are steps 55 and 60 again."""
    lines = []

    def run(first: int, last: int, started_s: int) -> None:
        for step in range(first, last + 1):
            lines.append(plain_bar(step, 100, elapsed_s=started_s + step - first))
            if step % 5 == 0:
                lines.append(f"{{'loss': {3 - step / 50:.2f}, 'learning_rate': 1e-05, 'epoch': {step / 100:.2f}}}")

    run(1, 60, started_s=1)
    lines += ["RuntimeError: CUDA error: an illegal memory access was encountered", " 50% 50/100 [00:00<?, ?it/s]"]
    run(51, 100, started_s=1)
    records = parse_all("\n".join(lines) + "\n")
    assert [record["step"] for record in records] == [*range(5, 61, 5), *range(55, 101, 5)]


def test_a_bar_redrawn_for_hours_without_a_newline_is_read_once_and_not_kept():
    """A custom loop's tqdm on a pipe writes `\\r` drawings and never a newline: fed in small chunks, the parser
    keeps at most about MAX_PENDING_CHARS of it, and the record after it has the last bar's step."""
    drawings = "".join("\r" + bar(step, 40_000) for step in range(40_000))  # about 2.4 MB
    text = drawings + "\r" + bar(40_000, 40_000) + "{'loss': 0.5, 'learning_rate': 1e-05}\n"
    parser = LogParser(clock=lambda: 0.0)
    records, kept = [], 0
    for start in range(0, len(text), 1000):
        records += parser.feed(text[start : start + 1000])
        kept = max(kept, parser._pending.chars)
    assert kept < MAX_PENDING_CHARS + 1000 < len(drawings) / 8
    assert [(record["step"], record["loss"]) for record in records + parser.flush()] == [(40_000, 0.5)]


def own_program_log(losses: list[str]) -> str:
    """nbtoolkit's program: its step line, then the Trainer's dict of that step (transformers 5 strings)."""
    return "".join(
        f"[nbtoolkit] step {10 * index}/300 (3%) | loss {float(loss):.4f} | lr 2.00e-05 | 64.0 samples/s\n"
        f"{{'loss': '{loss}', 'grad_norm': '1.02', 'learning_rate': '2e-05', 'epoch': '{index / 30:.4g}'}}\n"
        for index, loss in enumerate(losses, start=1)
    )


def test_a_flat_or_diverged_loss_never_moves_a_record_to_another_step():
    """Losses equal to 0.1% (a classifier at ln 2, a plateau, nan) must not pair a dict with the wrong step line."""
    for losses in (["0.6931", "0.6937", "0.6934", "0.6929", "0.6702"], ["2.437", "nan", "nan", "nan"]):
        text = own_program_log(losses)
        for chunk in (None, 5):
            assert [record["step"] for record in parse_all(text, chunk)] == [10 * n for n in range(1, len(losses) + 1)]


def test_autologs_order_without_a_bar_gives_every_dict_the_step_line_after_it():
    """disable_tqdm: the Trainer's dict, then nbtoolkit's step line; the first dict too (no step seen before it)."""
    text = "".join(
        f"{{'loss': {2 - step / 40}, 'learning_rate': 0.0001, 'epoch': {step / 40}}}\n"
        f"[nbtoolkit] step {step}/40 ({100 * step // 40}%) | loss {2 - step / 40:.4f} | lr 1.00e-04\n"
        for step in (10, 20, 30, 40)
    )
    assert [(record["kind"], record["step"]) for record in parse_all(text)] == [("train", n) for n in (10, 20, 30, 40)]


def test_an_evaluation_slower_than_training_never_becomes_the_training_bar():
    """100 steps at 5 it/s; at step 50 an evaluation of 100 batches at 4 it/s (generation), the same total and no
    description: its count and elapsed time pass the training bar's, and still the step stays 50 until training
    goes on."""
    lines = []
    for step in range(1, 101):
        lines.append(plain_bar(step, 100, elapsed_s=step // 5, rate="5.00it/s"))
        if step % 10 == 0:
            lines.append(f"{{'loss': {2 - step / 100:.2f}, 'learning_rate': 1e-05, 'epoch': {step / 100:.2f}}}")
        if step == 50:
            lines += [plain_bar(batch, 100, elapsed_s=batch // 4, rate="4.00it/s") for batch in range(101)]
            lines.append("{'eval_loss': 1.5, 'eval_runtime': 25.0, 'epoch': 0.5}")
    records = parse_all("\n".join(lines) + "\n")
    assert [(record["kind"], record["step"]) for record in records] == [
        *(("train", step) for step in range(10, 51, 10)),
        ("eval", 50),
        *(("train", step) for step in range(60, 101, 10)),
    ]


def test_a_quiet_log_settles_a_dict_held_for_a_step_line_that_does_not_come():
    """Bars off and no nbtoolkit: a train dict waits for the next line (autolog prints its step line there), so a
    quiet log would chart each logging step only when the next came. Settled, it is ready; a step line that still
    comes adds nothing, and a dict of nbtoolkit's own order is never held."""
    parser = LogParser(clock=lambda: 0.0)
    assert parser.feed("{'loss': 1.9, 'learning_rate': 0.0001, 'epoch': 0.25}\n") == []
    assert [(r["kind"], r["loss"], r["epoch"]) for r in parser.settle()] == [("train", 1.9, 0.25)]
    assert parser.settle() == []
    assert parser.feed("[nbtoolkit] step 10/40 (25%) | loss 1.9000 | lr 1.00e-04\n") == []
    assert parser.flush() == []

    own = LogParser(clock=lambda: 0.0)
    assert [r["step"] for r in own.feed(own_program_log(["1.9", "1.8"]))] == [10, 20]
    assert own.settle() == [] and own.flush() == []


def test_a_remote_jobs_status_between_a_step_line_and_its_dict_parts_nothing():
    """A follower writes the remote job's status as it polls: it can land between the program's step line and the
    Trainer's dict of that step (SageMaker's "Uploading" after the last step), and that step is still one record
    with its loss, not a lossless record and then the dict's."""
    text = (
        "[nbtoolkit] step 5/5 (100%) | loss 0.5000 | lr 1.00e-05\n"
        "[nbtoolkit] sagemaker: Uploading: Uploading generated training model\n"
        "[nbtoolkit] 06:13:32 training anomaly (train.on_anomaly: warn): the loss stays 0.5\n"
        "{'loss': '0.5', 'learning_rate': '1e-05', 'epoch': '1.0'}\n"
    )
    for chunk in (None, 7):
        records = parse_all(own_program_log(["0.9", "0.8"]) + text, chunk)
        assert [(record["step"], record["loss"]) for record in records] == [(10, 0.9), (20, 0.8), (5, 0.5)]
