"""The console's view of a log: one line per logging step, values as numbers, the same in any chunking."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nbtoolkit.metrics.console import ConsoleView
from tests.conftest import DATA


def shown(text: str, chunk: int | None = None) -> str:
    view = ConsoleView()
    pieces = [text] if chunk is None else [text[i : i + chunk] for i in range(0, len(text), chunk)]
    return "".join(view.feed(piece) for piece in pieces) + view.flush()


def test_a_users_trainer_log_shows_each_dict_as_one_line_of_numbers():
    """transformers 5 prints strings (`'loss': '1.785'`); the console shows the numbers, one line per dict."""
    text = (DATA / "trainer_v5_plain.log").read_text()
    lines = shown(text).splitlines()
    assert lines.count("[nbtoolkit] train at epoch 0.25 | loss 1.785 | grad_norm 0.3514 | learning_rate 0.0024") == 1
    assert "'" not in "".join(line for line in lines if line.startswith("[nbtoolkit]"))
    assert sum(line.startswith("[nbtoolkit] eval at epoch") for line in lines) == 2
    assert shown(text, chunk=5) == shown(text)


def test_nbtoolkits_own_program_keeps_its_line_and_drops_the_trainers_dict():
    text = (
        "{'loss': '1.532', 'grad_norm': '0.5', 'learning_rate': '4e-05', 'epoch': '0.2'}\n"
        "[nbtoolkit] step 20/150 (13%) | loss 1.5320 | lr 4.00e-05 | 12.5 samples/s\n"
        "{'eval_loss': '1.4', 'eval_accuracy': '0.5', 'epoch': '0.2'}\n"
        "a warning the program printed"
    )
    assert shown(text) == (
        "[nbtoolkit] step 20/150 (13%) | loss 1.5320 | lr 4.00e-05 | 12.5 samples/s\n"
        "[nbtoolkit] eval at epoch 0.2 | eval_loss 1.4 | eval_accuracy 0.5\n"
        "a warning the program printed"
    )


def test_only_the_trainers_dict_beside_each_step_line_is_dropped_a_users_own_dicts_show():
    """A script prints its own dicts after training (an evaluation loop): they are not the Trainer's dict of a
    reported step, so they show as numbers, in either order of step line and dict."""
    own_loop = (
        "my own test loop after training:\n"
        "{'loss': 0.731, 'batch': 1}\n"
        "{'loss': 0.702, 'batch': 2}\n"
        "{'learning_rate': 0.0001, 'note_id': 7}\n"
        "done\n"
    )
    shown_loop = (
        "my own test loop after training:\n"
        "[nbtoolkit] train | loss 0.731 | batch 1\n"
        "[nbtoolkit] train | loss 0.702 | batch 2\n"
        "[nbtoolkit] train | learning_rate 0.0001 | note_id 7\n"
        "done\n"
    )
    step = "[nbtoolkit] step 10/10 (100%) | loss 0.5000 | lr 1.00e-05\n"
    trainers = "{'loss': '0.5', 'learning_rate': '1e-05', 'epoch': '1.0'}\n"
    for log in (step + trainers + own_loop, trainers + step + own_loop):
        assert shown(log) == step + shown_loop
        assert shown(log, chunk=4) == step + shown_loop
    # a dict beside a step line but of another loss is not that step's: it shows
    assert shown(step + "{'loss': 0.9, 'batch': 3}\n") == step + "[nbtoolkit] train | loss 0.9 | batch 3\n"


def test_nan_and_inf_are_shown_as_written_not_a_crash():
    """A diverged run logs nan/inf; every console view must still show its lines (int(nan) raised)."""
    text = (
        "{'loss': 'nan', 'grad_norm': 'inf', 'learning_rate': '1e-05', 'epoch': '0.4'}\n"
        "{'eval_loss': 'nan', 'epoch': 'inf'}\n"
        "{'train_runtime': '1.0', 'train_loss': '-inf', 'epoch': '1.0'}\n"
    )
    assert shown(text) == (
        "[nbtoolkit] train at epoch 0.4 | loss nan | grad_norm inf | learning_rate 1e-05\n"
        "[nbtoolkit] eval at epoch inf | eval_loss nan\n"
        "[nbtoolkit] summary at epoch 1 | train_runtime 1 | train_loss -inf\n"
    )


def test_a_scripts_trainer_that_nbtoolkit_autologs_shows_one_line_per_step():
    """Autolog prints `[nbtoolkit] step` after the Trainer's dict for a script: job too (the spec said
    "not our program", so both lines were shown). The bar text before the dict stays."""
    bar = " 20%|██        | 4/20 [00:00<00:00, 37.93it/s]"
    text = (
        f"{bar}{{'loss': '1.785', 'grad_norm': '0.3514', 'learning_rate': '0.0024', 'epoch': '0.25'}}\n"
        " 25%|██▌       | 5/20 [00:00<00:00, 37.93it/s][nbtoolkit] step 5/20 (25%) | loss 1.7847\n"
        "{'loss': '1.801', 'learning_rate': '0.00165', 'epoch': '0.5'}\n"
        "[nbtoolkit] step 10/20 (50%) | loss 1.8007\n"
        "{'loss': '1.787', 'epoch': '0.75'}\n"
    )
    expected = (  # the last dict has no step line beside it (the log ends there): it shows, as numbers
        f"{bar}\n"
        " 25%|██▌       | 5/20 [00:00<00:00, 37.93it/s][nbtoolkit] step 5/20 (25%) | loss 1.7847\n"
        "[nbtoolkit] step 10/20 (50%) | loss 1.8007\n"
        "[nbtoolkit] train at epoch 0.75 | loss 1.787\n"
    )
    assert shown(text) == expected
    assert shown(text, chunk=3) == expected


def test_lines_that_are_not_a_whole_trainer_dict_stay_as_written():
    """A user's own print of a dict, or text after one, is not the Trainer's: nothing is dropped or relabelled."""
    lines = [
        "Config: {'learning_rate': 5e-05, 'optimizer': 'adamw_torch', 'scheduler': 'cosine'} (from args.json)",
        "Config: {'learning_rate': 5e-05, 'optimizer': 'adamw_torch'}",
        "best: {'eval_loss': 0.5, 'eval_accuracy': 0.9}",
        "{'eval_loss': 0.5, 'eval_accuracy': 0.9} <- best so far",
    ]
    text = "".join(line + "\n" for line in lines)
    assert shown(text) == text


AUTOLOGGED = (
    " 20%|##        | 4/20 [00:00<00:00, 37.93it/s]{'loss': '1.785', 'learning_rate': '0.0024', 'epoch': '0.25'}\n"
    "[nbtoolkit] step 5/20 (25%) | loss 1.7847\n"
    "{'loss': '1.801', 'learning_rate': '0.00165', 'epoch': '0.5'}\n"
    "[nbtoolkit] step 10/20 (50%) | loss 1.8007\n"
    "{'eval_loss': '1.4', 'eval_accuracy': '0.5', 'epoch': '0.5'}\n"
    "{'loss': '1.787', 'epoch': '0.75'}\n"
    "[nbtoolkit] step 15/20 (75%) | loss 1.7870 | ünïcode\n"
)


#: nbtoolkit's own program: its step line, then the Trainer's dict of that step
OWN_PROGRAM = (
    "[nbtoolkit] step 25/300 (8%) | loss 1.7987 | lr 1.84e-03 | 41.1 samples/s\n"
    "{'loss': '1.799', 'grad_norm': '0.857', 'learning_rate': '0.00184', 'epoch': '0.3333'}\n"
    "{'eval_loss': '1.792', 'eval_accuracy': '0.1667', 'epoch': '0.3333'}\n"
    "[nbtoolkit] step 50/300 (16%) | loss 1.6942 | lr 1.67e-03 | 586.9 samples/s\n"
    "{'loss': '1.694', 'grad_norm': '1.683', 'learning_rate': '0.001673', 'epoch': '0.6667'}\n"
    "[nbtoolkit] step 75/300 (25%) | loss 1.3069 | lr 1.51e-03 | 926.7 samples/s | ünïcode\n"
    "{'loss': '1.307', 'grad_norm': '2.853', 'learning_rate': '0.001507', 'epoch': '1'}\n"
)
#: a page holds at least two whole lines, a train dict and the line after it (the panel reads 64 KiB pages; a
#: line longer than a page is shown as it comes)
TWO_LINES = 2 * max(len(line.encode()) + 1 for line in (AUTOLOGGED + OWN_PROGRAM).splitlines())


def paged(service, job_id: str, limit: int, offset: int = 0) -> tuple[str, int]:
    """The console view of a job's log as a panel reads it: page after page from `offset` to where it stops (the end,
    or a page that moves on no further), and that offset."""
    text = ""
    while True:
        page = service.log(job_id, offset=offset, limit=limit, view="console")
        text += page.text
        if page.next == page.size or (page.next == offset and not page.text):
            return text, page.next
        offset = page.next


def running_log(store, name: str):
    """A running job's id and its log's path (not written yet)."""
    from nbtoolkit.runner.store import LOG_FILE

    record = store.create(name=name, task="causal-lm", backend="local")
    store.update(record.id, status="running")
    return record.id, store.job_dir(record.id) / LOG_FILE


def quiet(log) -> None:
    """The log as it is once it has been quiet for longer than SETTLE_S."""
    import os
    import time

    from nbtoolkit.metrics.parse import SETTLE_S

    long_ago = time.time() - SETTLE_S - 1
    os.utime(log, (long_ago, long_ago))


@settings(max_examples=60, deadline=None)
@given(
    log_text=st.sampled_from([AUTOLOGGED, OWN_PROGRAM]),
    limit=st.integers(min_value=TWO_LINES, max_value=400),
    cut=st.floats(min_value=0, max_value=1),
)
def test_a_panel_paging_through_the_console_view_sees_each_step_once(tmp_path_factory, log_text, limit, cut):
    """While the job runs (its log cut anywhere, even inside a line), pages of any size: no step twice, none lost;
    once it has ended, the pages add up to what a console shows of the whole log."""
    from nbtoolkit.runner import JobStore
    from nbtoolkit.server.service import JobsService

    store = JobStore(tmp_path_factory.mktemp("nbhome"))
    job_id, log = running_log(store, "paged")
    service = JobsService(store)
    log.write_text(log_text[: round(cut * len(log_text))])
    running, _ = paged(service, job_id, limit)
    assert all(running.count(line) <= 1 for line in running.splitlines() if "step" in line), running
    assert "[nbtoolkit] train" not in running, running  # no step shown twice: as its line and as its dict
    log.write_text(log_text)
    store.update(job_id, status="succeeded")
    whole, _ = paged(service, job_id, limit)
    assert whole == shown(log_text)
    assert whole.count("[nbtoolkit] step") == 3 and "'loss'" not in whole and "[nbtoolkit] train" not in whole


@settings(max_examples=60, deadline=None)
@given(
    log_text=st.sampled_from([AUTOLOGGED, OWN_PROGRAM]),
    limit=st.integers(min_value=TWO_LINES, max_value=400),
    cut=st.floats(min_value=0, max_value=1),
)
def test_a_log_that_went_quiet_anywhere_pages_each_step_once_and_goes_on_after_it(
    tmp_path_factory, log_text, limit, cut
):
    """The log quiet for SETTLE_S where it was cut: a last train dict shows as its own line, nothing else changes;
    paging on once the log grows (the dict's step line may come after all) shows no step twice; a finished log long
    quiet pages as one view of the whole."""
    from nbtoolkit.runner import JobStore
    from nbtoolkit.server.service import JobsService

    store = JobStore(tmp_path_factory.mktemp("nbhome"))
    job_id, log = running_log(store, "paged")
    service = JobsService(store)
    log.write_text(log_text[: round(cut * len(log_text))])
    quiet(log)
    before, offset = paged(service, job_id, limit)
    settled = [line for line in before.splitlines() if line.startswith("[nbtoolkit] train")]
    assert len(settled) <= 1 and (not settled or before.splitlines()[-1] == settled[0]), before
    log.write_text(log_text)  # it goes on
    after, _ = paged(service, job_id, limit, offset)
    together = (before + after).splitlines()
    assert "[nbtoolkit] train" not in after, (before, after)
    assert all(together.count(line) == 1 for line in together if "step" in line), together
    store.update(job_id, status="succeeded")
    quiet(log)
    whole, _ = paged(service, job_id, limit)
    assert whole == shown(log_text)


def test_the_console_view_always_moves_on_and_never_goes_back(store):
    """A train dict followed by a line longer than a page (a tqdm bar redrawn with \\r), and bytes that are not
    whole UTF-8 yet: paging still reaches the end, while the job runs and after, each offset after the last."""
    from nbtoolkit.runner.store import LOG_FILE
    from nbtoolkit.server.service import JobsService

    record = store.create(name="long", task="causal-lm", backend="local")
    store.update(record.id, status="running")
    bar = "".join(f"\r{i}/9000 [00:01<00:09, 9.0it/s]" for i in range(3000))
    text = "{'loss': '1.5', 'learning_rate': '0.001', 'epoch': '0.5'}\n" + bar + "\nlast line\n"
    log = store.job_dir(record.id) / LOG_FILE
    unfinished = "ünï".encode()[:-1]  # a last line the writer is inside of, inside a character too
    log.write_bytes(text.encode() + unfinished)
    service = JobsService(store)
    for running in (True, False):
        if not running:
            store.update(record.id, status="succeeded")
        offset, pages = 0, []
        while offset < log.stat().st_size and len(pages) < 100:
            page = service.log(record.id, offset=offset, view="console")
            assert page.next >= offset and (page.next > offset or running), (offset, page)
            if page.next == offset:
                break
            pages.append(page.text)
            offset = page.next
        shown = "".join(pages)
        assert shown.count("last line") == 1 and shown.count("[nbtoolkit] train at epoch 0.5") == 1
        assert offset == log.stat().st_size - (len(unfinished) if running else 0)  # it waits, then shows


def test_the_log_endpoint_names_its_views_for_anything_else(store):
    from nbtoolkit.server.service import InvalidRequest, JobsService

    record = store.create(name="viewed", task="causal-lm", backend="local")
    with pytest.raises(InvalidRequest, match=r"^view 'pretty' is not a log view; use one of raw, console$"):
        JobsService(store).log(record.id, view="pretty")


@pytest.mark.parametrize("log_text", [OWN_PROGRAM, AUTOLOGGED], ids=["own-program", "autologged"])
def test_the_log_parser_reads_a_consoles_text_into_the_records_of_the_raw_log(log_text):
    """`%%track_metrics` over `nbtoolkit logs` (the console) finds the raw log's records (kind, step, loss): a step
    line alone is a train record (its dict was dropped), a console's eval line an eval record; raw, nothing doubles."""
    from nbtoolkit.metrics.parse import LogParser

    def records(text: str) -> list[tuple]:
        parser = LogParser(clock=lambda: 0.0)
        found = parser.feed(text) + parser.flush()
        return [(r["kind"], r["step"], round(r.get("loss") or r.get("eval_loss") or 0, 3)) for r in found]

    raw = records(log_text)
    assert raw == records(shown(log_text))
    assert [kind for kind, _, _ in raw].count("train") == len(re.findall(r"'loss'", log_text))


def test_a_running_logs_page_keeps_a_step_line_with_its_dict_when_the_loss_is_flat(store):
    """nbtoolkit's order, losses equal to 0.1%: a poll between step 20's line and its dict shows step 20 once."""
    from nbtoolkit.runner.store import LOG_FILE
    from nbtoolkit.server.service import JobsService

    lines = [
        f"[nbtoolkit] step {step}/300 (3%) | loss {loss:.4f} | lr 2.00e-05\n"
        f"{{'loss': '{loss}', 'learning_rate': '2e-05', 'epoch': '{step / 300:.3g}'}}\n"
        for step, loss in ((10, 0.6931), (20, 0.6937), (30, 0.6712))
    ]
    record = store.create(name="flat", task="causal-lm", backend="local")
    store.update(record.id, status="running")
    log = store.job_dir(record.id) / LOG_FILE
    service = JobsService(store)
    log.write_text(lines[0] + lines[1].splitlines(keepends=True)[0])  # step 20's dict not written yet
    first = service.log(record.id, offset=0, view="console")
    log.write_text("".join(lines))
    second = service.log(record.id, offset=first.next, view="console")
    shown_text = first.text + second.text
    assert shown_text.count("step 20/300") == 1 and "[nbtoolkit] train" not in shown_text, shown_text


def test_a_line_longer_than_a_page_is_cut_at_a_bars_drawing_never_inside_a_character(store):
    """A terminal bar redrawn for minutes makes one line longer than the panel's 64 KiB page."""
    from nbtoolkit.runner.store import LOG_FILE
    from nbtoolkit.server.service import JobsService

    drawings = "".join(f"\r 57%|█████▋    | {step}/2000 [11:40<10:00,  9.50it/s]" for step in range(1500))
    record = store.create(name="long", task="causal-lm", backend="local")
    store.update(record.id, status="running")
    (store.job_dir(record.id) / LOG_FILE).write_text(drawings + "\n{'eval_loss': 1.5, 'epoch': 0.5}\n")
    page = JobsService(store).log(record.id, offset=0, limit=64 * 1024, view="console")
    assert 0 < page.next < 64 * 1024 and "\ufffd" not in page.text
    assert drawings.encode()[page.next : page.next + 1] == b"\r"  # the next page starts at a drawing


#: a script's Trainer with bars off and no nbtoolkit: a train dict with no step line after it
QUIET_DICT = "{'loss': '1.9', 'learning_rate': '0.0001', 'epoch': '0.25'}\n"
QUIET_LINE = "[nbtoolkit] train at epoch 0.25 | loss 1.9 | learning_rate 0.0001\n"
LATE_STEP_LINE = "[nbtoolkit] step 10/40 (25%) | loss 1.9000 | lr 1.00e-04\n"


def test_a_quiet_running_logs_last_train_dict_shows_once_the_log_has_settled(store):
    """A running job's page holds back a last train dict (autolog's step line may follow it); once the log has been
    quiet for SETTLE_S it shows, the unfinished line after it still waits, and a late step line does not repeat it."""
    import os
    import time

    from nbtoolkit.metrics.parse import SETTLE_S
    from nbtoolkit.server.service import JobsService

    job_id, log = running_log(store, "quiet")
    log.write_text(QUIET_DICT + "eval 3/8")
    service = JobsService(store)
    assert service.log(job_id, view="console").text == ""
    quiet = time.time() - SETTLE_S - 1
    os.utime(log, (quiet, quiet))
    page = service.log(job_id, view="console")
    assert page.text == QUIET_LINE
    assert page.next == len(QUIET_DICT)
    log.write_text(QUIET_DICT + LATE_STEP_LINE)  # the log's order is now known: its step line, after its dict
    assert service.log(job_id, offset=page.next, view="console").text == LATE_STEP_LINE


def test_following_a_quiet_log_shows_its_held_dict(store, monkeypatch, capsys):
    """`nbtoolkit logs --follow`: the follower says once when the log has gone quiet, and the console shows the
    train dict it held for a step line."""
    import threading

    from nbtoolkit import cli
    from nbtoolkit.api import Job
    from nbtoolkit.runner import control

    monkeypatch.setattr(control, "SETTLE_S", 0.2)
    job_id, log = running_log(store, "quiet")
    log.write_text(QUIET_DICT)
    ends = threading.Timer(2.0, store.update, args=(job_id,), kwargs={"status": "succeeded"})
    ends.start()
    assert list(control.follow_log(job_id, store=store, poll=0.05)) == [QUIET_DICT, ""]  # "": quiet, once
    ends.join()

    # its step line came late all the same: the log's order is still autolog's, so step 20 shows once
    step_20 = "{'loss': '1.7', 'epoch': '0.5'}\n[nbtoolkit] step 20/40 (50%) | loss 1.7000\n"
    monkeypatch.setattr(cli, "follow_log", lambda *_, **__: iter([QUIET_DICT, "", LATE_STEP_LINE, step_20]))
    assert cli.follow(Job(job_id, store)) == 0
    assert capsys.readouterr().out.startswith(QUIET_LINE + LATE_STEP_LINE + step_20.splitlines()[1] + "\n")


def test_a_quiet_logs_page_waits_for_a_line_written_as_it_was_read(store, monkeypatch):
    """The log went quiet, then step 20's dict was written between the page's look at the file and its read: that
    dict is not quiet yet (its step line comes a moment later), so it waits."""
    from nbtoolkit.runner import control
    from nbtoolkit.server.service import JobsService

    job_id, log = running_log(store, "racing")
    log.write_text(QUIET_DICT + LATE_STEP_LINE)
    quiet(log)
    read = control.read_log_bytes

    def written_as_read(*args, **kwargs):
        with open(log, "a") as handle:
            handle.write("{'loss': '1.7', 'epoch': '0.5'}\n")
        return read(*args, **kwargs)

    monkeypatch.setattr(control, "read_log_bytes", written_as_read)
    page = JobsService(store).log(job_id, offset=len(QUIET_DICT + LATE_STEP_LINE), view="console")
    assert page.text == "" and page.next == len(QUIET_DICT + LATE_STEP_LINE)


def test_a_quiet_log_in_nbtoolkits_order_still_waits_for_a_last_step_lines_dict(store):
    """nbtoolkit's program prints the step line first: a quiet log's last step line still waits for its dict (else
    the dict, when it comes, would show as a second line of that step)."""
    from nbtoolkit.server.service import JobsService

    job_id, log = running_log(store, "own")
    first_step = OWN_PROGRAM.splitlines(keepends=True)[:2]
    log.write_text("".join(first_step) + "[nbtoolkit] step 50/300 (16%) | loss 1.6942\n")
    quiet(log)
    service = JobsService(store)
    page = service.log(job_id, view="console")
    assert page.text == first_step[0]
    log.write_text(
        "".join(first_step) + "[nbtoolkit] step 50/300 (16%) | loss 1.6942\n" + OWN_PROGRAM.split("\n")[4] + "\n"
    )
    assert service.log(job_id, offset=page.next, view="console").text == "[nbtoolkit] step 50/300 (16%) | loss 1.6942\n"


def test_a_view_settled_twice_still_knows_the_dict_it_showed():
    """`logs -f` settles again after a partial line: the dict it showed still pairs with its late step line."""
    view = ConsoleView()
    out = view.feed(QUIET_DICT) + view.settle() + view.settle() + view.feed("[nbtoolkit] step 10/40") + view.settle()
    out += view.feed(" (25%) | loss 1.9000 | lr 1.00e-04\n{'loss': '1.7', 'epoch': '0.5'}\n")
    out += view.feed("[nbtoolkit] step 20/40 (50%) | loss 1.7000\n")
    assert out == QUIET_LINE + LATE_STEP_LINE + "[nbtoolkit] step 20/40 (50%) | loss 1.7000\n"


def test_following_a_log_already_quiet_shows_its_held_dict_at_once(store):
    """`logs -f` on a job whose log has been quiet for long: the quiet is the log's, not the follower's."""
    import threading

    from nbtoolkit.runner import control

    job_id, log = running_log(store, "quiet")
    log.write_text(QUIET_DICT)
    quiet(log)
    ends = threading.Timer(1.0, store.update, args=(job_id,), kwargs={"status": "succeeded"})
    ends.start()
    assert list(control.follow_log(job_id, store=store, poll=0.05)) == [QUIET_DICT, ""]
    ends.join()


def test_a_grpo_runs_step_line_carries_its_reward_through_the_console():
    """The console drops the Trainer's dict beside a step line, so a grpo run's reward must be on the line itself;
    `%%track_metrics` over the console reads it back. A NaN reward (TRL logs None) shows no reward."""
    from nbtoolkit.metrics.parse import LogParser
    from nbtoolkit.train.callbacks import progress_line

    record = {"step": 4, "max_steps": 8, "loss": 0.0123, "reward": 0.75, "learning_rate": 1e-5}
    step_line = progress_line(record, elapsed=2.0)
    text = "{'loss': '0.0123', 'reward': '0.75', 'learning_rate': '1e-05', 'epoch': '0.5'}\n" + step_line + "\n"
    console = shown(text)
    assert "| reward 0.7500 |" in console and "'reward'" not in console
    parser = LogParser(clock=lambda: 0.0)
    (train,) = [r for r in parser.feed(console) + parser.flush() if r["kind"] == "train"]
    assert (train["step"], train["loss"], train["reward"]) == (4, 0.0123, 0.75)
    assert "reward" not in progress_line({**record, "reward": None}, elapsed=2.0)
