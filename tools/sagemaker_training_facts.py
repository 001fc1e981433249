"""Write tests/facts/sagemaker-training-5.1.4.json: the SM_* environment and /opt/ml folders a SageMaker training
container sets up, read from the source of the toolkit that sets them (sagemaker-training, which the Hugging Face
training images run), for the local stand-in (nbtoolkit/backends/sagemaker/standin.py) and the entry script to be
held to. Its C extension and dependencies keep it out of nbtoolkit's environment, so its source is parsed.

    pip download --no-deps --no-binary :all: sagemaker-training==5.1.4 -d /tmp/wheels
    python tools/sagemaker_training_facts.py /tmp/wheels/sagemaker_training-5.1.4.tar.gz
"""

from __future__ import annotations

import ast
import hashlib
import json
import posixpath
import sys
import tarfile
from pathlib import Path

ENVIRONMENT = "src/sagemaker_training/environment.py"
MAPPING = "src/sagemaker_training/mapping.py"
OUT = Path(__file__).resolve().parent.parent / "tests" / "facts" / "sagemaker-training-5.1.4.json"
BASE = "/opt/ml"  # SAGEMAKER_BASE_PATH, the default of base_dir


def read(archive: tarfile.TarFile, inner: str) -> str:
    member = next(name for name in archive.getnames() if name.endswith(inner))
    return archive.extractfile(member).read().decode()


def folders(tree: ast.Module) -> dict[str, str]:
    """The module's `name = os.path.join(known, "part")` folders, evaluated from base_dir = /opt/ml."""
    known = {"base_dir": BASE}
    for node in tree.body:
        if not (isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)):
            continue
        call = node.value
        if isinstance(call, ast.Call) and ast.unparse(call.func) == "os.path.join":
            parts = [
                known.get(arg.id) if isinstance(arg, ast.Name) else getattr(arg, "value", None) for arg in call.args
            ]
            if all(isinstance(part, str) for part in parts):
                known[node.targets[0].id] = posixpath.join(*parts)
    return known


def env_keys(tree: ast.Module) -> tuple[list[str], list[str]]:
    """Environment.to_env_vars: the keys of its `env` dict, and the prefixes of the keys its loops add."""
    environment = next(node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == "Environment")
    method = next(node for node in environment.body if isinstance(node, ast.FunctionDef) and node.name == "to_env_vars")
    keys, prefixes = [], []
    for node in ast.walk(method):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict) and ast.unparse(node.targets[0]) == "env":
            keys += [key.value for key in node.value.keys if isinstance(key, ast.Constant)]
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.BinOp):  # env["channel_%s" % name]
            prefixes.append(node.slice.left.value.replace("%s", ""))
        if (
            isinstance(node, ast.Subscript)
            and isinstance(node.slice, ast.Constant)
            and ast.unparse(node.value) == "env"
        ):
            keys.append(node.slice.value)  # env["topology"] = ...
    return keys, prefixes


def main(sdist: str) -> None:
    with tarfile.open(sdist) as archive:
        environment = ast.parse(read(archive, ENVIRONMENT))
        mapping = read(archive, MAPPING)
    if 'decoded_name = "SM_%s" % str(key).upper()' not in mapping:
        sys.exit(f"{MAPPING}: format_key no longer names variables SM_<KEY>; read it again")
    keys, prefixes = env_keys(environment)
    found = folders(environment)
    facts = {
        "source": f"{Path(sdist).name} (sha256 {hashlib.sha256(Path(sdist).read_bytes()).hexdigest()})",
        "made_by": "tools/sagemaker_training_facts.py",
        "variables": sorted(f"SM_{key.upper()}" for key in keys),
        "variable_prefixes": sorted(f"SM_{prefix.upper()}" for prefix in prefixes),
        "folders": {name: found[name] for name in ("model_dir", "input_dir", "_input_data_dir", "output_data_dir")},
        "channel_folder": f"{found['_input_data_dir']}/<channel> (channel_path in {ENVIRONMENT})",
    }
    OUT.write_text(json.dumps(facts, indent=2) + "\n")
    print(f"wrote {OUT}: {len(facts['variables'])} variables, prefixes {facts['variable_prefixes']}")


if __name__ == "__main__":
    main(sys.argv[1])
