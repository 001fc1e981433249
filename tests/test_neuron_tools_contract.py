"""The neuron backend's launch and the stand-ins in tests/fakes/bin against the Neuron SDK's own tools.

`neuron_parallel_compile` (torch-neuronx's console script) is held to tests/facts/neuron-parallel-compile.json, which
tools/neuron_parallel_compile_facts.py reads from the tool's own source: every precompile command of a real launch must
reach the trial run whole (the tool parses its own options out of its command line first, prefixes included), none may
be one it refuses, and the stand-in must parse, refuse, set and exit as the facts say. `neuron-ls` is a binary of the
aws-neuronx-tools OS package whose source is not public: its documented output (tests/facts/neuron-ls.json) is what
the backend's reading of it, and the stand-in's output, are held to.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from nbtoolkit.backends.neuron.render import NEURON_LS, PARALLEL_COMPILE, neuron_cores
from nbtoolkit.hardware.catalog import instance

TESTS = Path(__file__).resolve().parent
FACTS = json.loads((TESTS / "facts" / "neuron-parallel-compile.json").read_text())
NEURON_LS_FACTS = json.loads((TESTS / "facts" / "neuron-ls.json").read_text())
FAKES = TESTS / "fakes" / "bin"
#: every real launch with a precompile stage, as reviewed (tests/real_launches.py writes them)
PRECOMPILES = {
    path.parent.name: stage["argv"]
    for path in sorted((TESTS / "golden").glob("*/launch.json"))
    for stage in json.loads(path.read_text())["stages"]
    if stage["argv"][0] == PARALLEL_COMPILE
}


def load_stand_in():
    loader = importlib.machinery.SourceFileLoader("neuron_parallel_compile_stand_in", str(FAKES / PARALLEL_COMPILE))
    module = importlib.util.module_from_spec(importlib.util.spec_from_loader(loader.name, loader))
    loader.exec_module(module)
    return module


STAND_IN = load_stand_in()


def test_the_stand_ins_command_line_is_the_real_tools():
    options = {option for action in STAND_IN.parser()._actions for option in action.option_strings}
    assert options == {*FACTS["command_line"]["options"], "-h", "--help"}
    assert FACTS["command_line"]["parsed_with"] == "parse_known_args" and FACTS["command_line"]["allow_abbrev"]


@pytest.mark.parametrize("golden", sorted(PRECOMPILES))
def test_each_precompile_command_reaches_the_trial_run_whole(golden):
    """The real tool takes its own options (and any prefix of one) out of its command line before it runs the rest:
    a word of ours that it took would change the run, or the tool."""
    argv = PRECOMPILES[golden]
    parsed, command = STAND_IN.parser().parse_known_args(argv[1:])
    assert command == argv[1:]
    assert vars(parsed) == vars(STAND_IN.parser().parse_known_args([])[0])  # every option of the tool at its default
    assert not STAND_IN.refused(command)
    flags = json.loads((TESTS / "golden" / golden / "launch.json").read_text())["env"]["NEURON_CC_FLAGS"].split()
    assert "cache_dir" in FACTS["neuron_cc_flags_read"] and flags[0].startswith("--cache_dir=")


def test_the_real_launches_have_precompile_stages_to_check():
    assert sorted(PRECOMPILES) == ["t5-large-trainium", "t5-small-trainium"]


def run_stand_in(tmp_path: Path, *argv: str, **environment: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(FAKES / PARALLEL_COMPILE), *argv],
        cwd=tmp_path,
        env={**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}", **environment},
        capture_output=True,
        text=True,
        timeout=30,
    )


def test_the_stand_in_runs_the_command_with_the_real_tools_variables_and_exits_as_it_does(tmp_path):
    names = [*FACTS["trial_run"]["sets"], "NEURON_PARALLEL_COMPILE"]
    show = f"import json, os; print(json.dumps({{name: os.environ.get(name) for name in {names!r}}}))"
    done = run_stand_in(tmp_path, sys.executable, "-c", show)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["NEURON_EXTRACT_GRAPHS_ONLY"] == FACTS["trial_run"]["sets"]["NEURON_EXTRACT_GRAPHS_ONLY"] == "1"
    assert all(seen.values()) and seen["NEURON_PARALLEL_COMPILE"] == "1"  # the documented one too

    failing = run_stand_in(tmp_path, sys.executable, "-c", "raise SystemExit(7)")
    assert failing.returncode == FACTS["trial_run"]["exit_code_when_the_command_fails"] == 1  # not the command's 7
    ignored = run_stand_in(tmp_path, "false", NEURON_IGNORE_TRAINING_SCRIPT_ERROR_AND_COMPILE="1")
    assert ignored.returncode == 0 and FACTS["trial_run"]["continues_when_set"]
    nothing = run_stand_in(tmp_path)
    assert nothing.returncode == FACTS["trial_run"]["exit_code_without_a_command"] and "usage:" in nothing.stdout
    redirected = run_stand_in(tmp_path, "torchrun", "--redirects=3", "train.py")
    assert redirected.returncode == FACTS["trial_run"]["exit_code_when_refused"] == 1

    taken = run_stand_in(tmp_path, "--num", "3", sys.executable, "-c", "print('ran')")  # --num is --num_parallel's
    assert taken.returncode == 0 and taken.stdout.strip() == "ran"
    assert (tmp_path / "neuron_parallel_compile.record").read_text().split("--- env")[0].split()[0] == sys.executable


def test_the_backend_reads_neuron_ls_as_documented_and_the_stand_in_prints_it():
    documented = "\n".join(NEURON_LS_FACTS["show_all_procs_trn2_48xlarge_first_two_devices"])
    assert neuron_cores(documented) == 16  # 2 devices of 8 NeuronCores; a process's continuation row adds none
    stand_in = subprocess.run([str(FAKES / NEURON_LS)], capture_output=True, text=True, timeout=30, check=True).stdout
    header = [line for line in stand_in.splitlines() if line.startswith("|")][:2]
    documented_header = documented.splitlines()[1:3]
    for row, documented_row in zip(header, documented_header, strict=True):
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        documented_cells = [cell.strip() for cell in documented_row.strip("|").split("|")]
        assert cells == [cell for cell in documented_cells if cell in cells], (cells, documented_cells)
    assert neuron_cores(stand_in) == instance("trn1.2xlarge").devices == 2  # what its first line names
