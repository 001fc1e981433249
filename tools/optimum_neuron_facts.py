"""Write tests/facts/optimum-neuron-0.4.1.json: what optimum-neuron 0.4.1 (Neuron SDK 2.26's) takes, read from its
own wheel's source (it cannot be imported without torch-neuronx), for the fake in tests/fakes to be held to.

    pip download --no-deps optimum-neuron==0.4.1 -d /tmp/wheels
    python tools/optimum_neuron_facts.py /tmp/wheels/optimum_neuron-0.4.1-py3-none-any.whl
"""

from __future__ import annotations

import ast
import hashlib
import json
import sys
import zipfile
from pathlib import Path

ARGS = "optimum/neuron/trainers/training_args.py"
TRAINER = "optimum/neuron/trainers/transformers.py"
OUT = Path(__file__).resolve().parent.parent / "tests" / "facts" / "optimum-neuron-0.4.1.json"


def class_node(source: str, name: str) -> ast.ClassDef:
    return next(node for node in ast.parse(source).body if isinstance(node, ast.ClassDef) and node.name == name)


def main(wheel: str) -> None:
    with zipfile.ZipFile(wheel) as archive:
        arguments = class_node(archive.read(ARGS).decode(), "NeuronTrainingArguments")
        trainer_source = archive.read(TRAINER).decode()
    fields = [
        node.target.id
        for node in arguments.body
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
    ]
    trainer = class_node(trainer_source, "NeuronTrainer")
    init = next(node for node in trainer.body if isinstance(node, ast.FunctionDef) and node.name == "__init__")
    refusal = next(
        ast.unparse(node.exc)
        for node in ast.walk(init)
        if isinstance(node, ast.Raise) and node.exc is not None and "Evaluation" in ast.unparse(node.exc)
    )
    facts = {
        "source": f"{Path(wheel).name} (sha256 {hashlib.sha256(Path(wheel).read_bytes()).hexdigest()})",
        "made_by": "tools/optimum_neuron_facts.py",
        "NeuronTrainingArguments": {
            "file": ARGS,
            "bases": [ast.unparse(base) for base in arguments.bases],
            "fields": fields,
        },
        "NeuronTrainer": {
            "file": TRAINER,
            "bases": [ast.unparse(base) for base in trainer.bases],
            "init_parameters": [argument.arg for argument in [*init.args.args, *init.args.kwonlyargs]][1:],
            "init_raises_when_given_eval_dataset": refusal,
        },
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(facts, indent=2) + "\n")
    print(f"wrote {OUT}: {len(fields)} fields")


if __name__ == "__main__":
    main(sys.argv[1])
