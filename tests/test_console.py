"""The console's view of a log: one line per logging step, values as numbers, the same in any chunking."""

from __future__ import annotations

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
    expected = (
        f"{bar}\n"
        " 25%|██▌       | 5/20 [00:00<00:00, 37.93it/s][nbtoolkit] step 5/20 (25%) | loss 1.7847\n"
        "[nbtoolkit] step 10/20 (50%) | loss 1.8007\n"
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
