"""Write tests/facts/neuron-parallel-compile.json: what the Neuron SDK's `neuron_parallel_compile` does with the command
it is given, read from its own source, for the neuron backend's precompile stage and the stand-in in tests/fakes/bin to
be held to.

The tool is torch-neuronx's console script `torch_neuronx.parallel_compile.neuron_parallel_compile:main`. Its wheel is
on the Neuron repository only (PyPI's torch-neuronx is a placeholder); give the wheel, or the module's source alone:

    python tools/neuron_parallel_compile_facts.py torch_neuronx-2.8.0.2.10.13553-py3-none-any.whl
    python tools/neuron_parallel_compile_facts.py neuron_parallel_compile.py --read-from "where the copy came from"
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import zipfile
from pathlib import Path
from typing import Any

MODULE = "torch_neuronx/parallel_compile/neuron_parallel_compile.py"
OUT = Path(__file__).resolve().parent.parent / "tests" / "facts" / "neuron-parallel-compile.json"
#: what the tool's source does not settle, as AWS documents it (aws-neuron/aws-neuron-sdk at the commits named)
DOCUMENTED = {
    "usage": {
        "fact": "neuron_parallel_compile <run commands>: the trial run's command follows the tool's name as is",
        "where": "frameworks/torch/torch-neuronx/api-reference-guide/training/pytorch-neuron-parallel-compile.rst "
        "(commit 27461f50)",
    },
    "cache_dir_flag": {
        "fact": "--cache_dir=<cache URL> in NEURON_CC_FLAGS selects the compile cache, over NEURON_COMPILE_CACHE_URL; "
        "the same URL for the precompile and the real run reuses its graphs",
        "where": "the same page",
    },
    "graph_extraction_variable": {
        "fact": "the command runs with NEURON_PARALLEL_COMPILE=1: AWS's own T5 tutorial script picks its short trial "
        'run by `if [ $NEURON_PARALLEL_COMPILE == "1" ]` under `neuron_parallel_compile ./run_2w.sh`; the module '
        "read here does not set it itself (libneuronxla, which it imports, could not be read)",
        "where": "frameworks/torch/torch-neuronx/tutorials/training/tutorial_source_code/t5_finetuning/"
        "t5_finetuning_multi_worker_training_code.sh (commit c7830321)",
    },
}


def function(tree: ast.Module, name: str) -> ast.FunctionDef:
    return next(node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == name)


def calls(node: ast.AST, attribute: str) -> list[ast.Call]:
    return [
        call
        for call in ast.walk(node)
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == attribute
    ]


def keyword(call: ast.Call, name: str, default: Any = None) -> Any:
    found = next((item.value for item in call.keywords if item.arg == name), None)
    return default if found is None else ast.literal_eval(found) if isinstance(found, ast.Constant | ast.List) else None


def options(parse: ast.FunctionDef) -> dict[str, Any]:
    """The tool's own command line: its options (taking a value or not) and how it parses."""
    parser = calls(parse, "ArgumentParser")[0]
    declared = {}
    for call in calls(parse, "add_argument"):
        takes_value = keyword(call, "action", "store") not in {"store_true", "store_false", "count"}
        for name in (ast.literal_eval(arg) for arg in call.args):
            declared[name] = {"takes_value": takes_value, "choices": keyword(call, "choices")}
            if name == "--command":
                declared[name]["default"] = keyword(call, "default")
    return {
        "prog": keyword(parser, "prog"),
        "add_help": keyword(parser, "add_help", True),
        "allow_abbrev": keyword(parser, "allow_abbrev", True),  # argparse's default: a prefix of an option is it
        "parsed_with": next(call.func.attr for call in ast.walk(parse) if _is_parse(call)),
        "options": declared,
    }


def _is_parse(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in {"parse_args", "parse_known_args"}
    )


def trial_run(run: ast.FunctionDef) -> dict[str, Any]:
    """What the trial run of the command gets: the variables set for every command (not those of `--command analyze`),
    when the tool refuses the command, and how it exits when the command fails."""
    environment = {}
    for statement in run.body:  # the function's own statements: the conditional ones are analyze's
        if not isinstance(statement, ast.Assign) or not isinstance(target := statement.targets[0], ast.Subscript):
            continue
        if ast.unparse(target.value) == "os.environ":
            value = statement.value
            environment[ast.literal_eval(target.slice)] = (
                value.value if isinstance(value, ast.Constant) else f"<{ast.unparse(value)}>"
            )
    refusal = next(
        node for node in ast.walk(run) if isinstance(node, ast.Assign) and "redirect" in ast.unparse(node.targets[0])
    )
    word, argument = (node.value for node in ast.walk(refusal.value) if isinstance(node, ast.Constant))
    refused = next(
        node for node in run.body if isinstance(node, ast.If) and ast.unparse(node.test) == refusal.targets[0].id
    )
    failed = next(
        node for node in ast.walk(run) if isinstance(node, ast.If) and ast.unparse(node.test) == "return_code != 0"
    )
    exits = [ast.literal_eval(call.args[0]) for call in calls(failed, "exit")]
    without_command = next(
        node for node in run.body if isinstance(node, ast.If) and ast.unparse(node.test) == "not unparsed_args"
    )
    return {
        "sets": environment,
        "refuses_when": ast.unparse(refusal.value),
        "refuses": {"command_word": word, "argument_containing": argument},
        "exit_code_when_refused": ast.literal_eval(calls(refused, "exit")[0].args[0]),
        "exit_code_when_the_command_fails": exits[-1],
        "exit_code_without_a_command": ast.literal_eval(calls(without_command, "exit")[0].args[0]),
        "continues_when_set": sorted(
            {
                ast.unparse(name)
                for name in ast.walk(failed)
                if isinstance(name, ast.Name) and name.id.startswith("NEURON_")
            }
        ),
    }


def read(tree: ast.Module) -> list[str]:
    """The environment variables the module reads by name."""
    return sorted(
        {
            call.args[0].value
            for call in calls(tree, "get")
            if ast.unparse(call.func) == "os.environ.get" and isinstance(call.args[0], ast.Constant)
        }
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", type=Path, help=f"a torch-neuronx wheel, or its {MODULE}")
    parser.add_argument("--read-from", help="where a module given alone came from (its version, its address)")
    args = parser.parse_args()
    if args.source.suffix == ".whl":
        with zipfile.ZipFile(args.source) as wheel:
            text = wheel.read(MODULE).decode()
        origin = f"{args.source.name}: {MODULE}"
    else:
        text = args.source.read_text()
        origin = f"{MODULE} ({len(text)} characters), {args.read_from or 'origin not given'}"
    tree = ast.parse(text)
    main_function = function(tree, "main")
    compile_function = function(tree, "parallel_compile")
    facts = {
        "source": f"{origin} (sha256 {hashlib.sha256(text.encode()).hexdigest()})",
        "made_by": "tools/neuron_parallel_compile_facts.py",
        "command_line": options(function(tree, "_extract_args")),
        "trial_run": trial_run(function(tree, "run_train_script")),
        "reads": read(tree),
        "neuron_cc_flags_read": sorted(  # libneuronxla.libncc.setup_args() parses NEURON_CC_FLAGS into ncc_args
            {
                node.attr
                for node in ast.walk(main_function)
                if isinstance(node, ast.Attribute) and ast.unparse(node.value) == "ncc_args"
            }
        ),
        "exit_code_after_compiling": ast.unparse(
            next(node.value for node in ast.walk(compile_function) if isinstance(node, ast.Return) and node.value)
        ),
        "documented": DOCUMENTED,
    }
    OUT.write_text(json.dumps(facts, indent=2) + "\n")
    print(f"wrote {OUT}: {len(facts['command_line']['options'])} options, sets {sorted(facts['trial_run']['sets'])}")


if __name__ == "__main__":
    main()
