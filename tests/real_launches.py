"""The real launches of the example notebooks, rendered as golden files (tests/golden/NAME/).

Each spec in notebooks/specs/ is the real run of one example notebook. Its rendered launch
(run.sh, launch.json and every file the backend writes: the spec.json the training program reads,
ds_config.json, the SageMaker request and scripts) is kept under tests/golden/<spec name>/ and reviewed line by line against the
tutorial; tests/test_real_launches.py fails when a change alters one. What differs between
machines is written as a placeholder: this interpreter as `python`, a free port as `<port>`.

    python -m tests.real_launches    # write the goldens again (then read the diff)
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from nbtoolkit.backends import dispatch
from nbtoolkit.spec import RunSpec, load_spec

ROOT = Path(__file__).resolve().parent.parent
SPECS = ROOT / "notebooks" / "specs"
GOLDEN = ROOT / "tests" / "golden"


#: beside a spec, the changes of its compiled run: the notebook launches the two runs compare_compiled makes
COMPILED = ".compiled.json"
#: the real runs their notebook starts from the run before (`model: job:ID`): their golden reads that job's model
#: data as SageMaker names it, `s3://<bucket>/<base job name>/<training job name>/output/model.tar.gz`
CHAINED_FROM = {"chat-dpo-qwen": "chat-sft-qwen", "chat-grpo-qwen": "chat-dpo-qwen"}
MODEL_DATA = "s3://<bucket>/{name}/<training job>/output/model.tar.gz"


def real_specs() -> dict[str, RunSpec]:
    """Golden name -> spec: each spec file, and for one with compiled changes the two runs compared."""
    from nbtoolkit.compiled import compiled_variants

    specs = {path.stem: load_spec(path.read_text()) for path in sorted(SPECS.glob("*.yaml"))}
    for path in sorted(SPECS.glob(f"*{COMPILED}")):
        stem = path.name.removesuffix(COMPILED)
        for label, variant in compiled_variants(specs[stem], json.loads(path.read_text())).items():
            specs[f"{stem}-{label}"] = variant
    return specs


def as_launched(name: str, spec: RunSpec) -> RunSpec:
    """The spec as its notebook launches it: a chained run reads the earlier job's model data (the spec file's
    model is its architecture, what the plan and the rehearsal size)."""
    earlier = CHAINED_FROM.get(name)
    return spec.model_copy(update={"model": MODEL_DATA.format(name=earlier)}) if earlier else spec


def _placeholders(text: str) -> str:
    text = text.replace(sys.executable, "python")
    text = re.sub(  # an earlier SageMaker job's model data: its bucket and the training job's timestamped name
        r"s3://[\w.-]+/([\w-]+)/\1-[\d-]+/output/model\.tar\.gz", MODEL_DATA.format(name=r"\1"), text
    )
    return re.sub(r"(--master_port=|--rdzv_endpoint=[\w.]+:)\d+", r"\g<1><port>", text)


def golden_files(spec: RunSpec) -> dict[str, str]:
    """File name -> text, as a reviewer reads the real launch."""
    launch = dispatch.render(spec)
    files = {"run.sh": launch.run_sh(), "launch.json": launch.to_json() + "\n"}
    files.update(launch.files)
    return {name: _placeholders(text) for name, text in files.items()}


def write_goldens() -> None:
    for name, spec in real_specs().items():
        folder = GOLDEN / name
        for path in folder.rglob("*") if folder.exists() else []:
            if path.is_file():
                path.unlink()
        files = golden_files(as_launched(name, spec))
        for file_name, text in files.items():
            path = folder / file_name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        print(f"wrote {folder.relative_to(ROOT)}/: {', '.join(sorted(files))}")


def launched_processes(spec: RunSpec) -> int:
    """How many training processes the rendered launch starts on all nodes, read from its argv."""
    argv = dispatch.render(spec).main_stage.argv
    options = dict(item.split("=", 1) for item in argv if item.startswith("--") and "=" in item)
    if "--num_gpus" in options:  # DeepSpeed's launcher: per node, nodes from the hostfile
        return int(options["--num_gpus"]) * spec.hardware.nodes
    if "--nproc_per_node" in options:
        return int(options["--nproc_per_node"]) * int(options["--nnodes"])
    job = json.loads(dispatch.render(spec).files.get("sagemaker/job.json", "{}"))
    return (job.get("processes_per_node") or 1) * job.get("instance_count", 1) if job else 1


if __name__ == "__main__":
    write_goldens()
