"""The neuron backend's launch: render, and the checks it makes."""

from __future__ import annotations

import shutil
import subprocess

from nbtoolkit.backends import LaunchError
from nbtoolkit.backends.neuron.settings import NEURON_WORKERS, NeuronSpec
from nbtoolkit.backends.program import program_args
from nbtoolkit.backends.torchrun.render import rendezvous_port, torchrun_argv, torchrun_launch, train_stage
from nbtoolkit.hardware.catalog import CatalogError
from nbtoolkit.hardware.catalog import instance as catalog_instance
from nbtoolkit.launching.launch import Launch, Stage
from nbtoolkit.spec import RunSpec

NAME = "neuron"
NEURON_LS = "neuron-ls"
PARALLEL_COMPILE = "neuron_parallel_compile"
TORCHRUN_ON_PATH = ["torchrun"]
PYTHON = "python3"
PRECOMPILE_DIR = "precompile"
PREDICT_ENV = {"NEURON_NUM_DEVICES": "0"}
STOCHASTIC_ROUNDING = "NEURON_RT_STOCHASTIC_ROUNDING_EN"
#: trn1 instances run two hardware threads per core (128 vCPUs = 64 cores on a trn1.32xlarge)
THREADS_PER_CORE = 2


def neuron_env(spec: RunSpec) -> dict[str, str]:
    """The persistent compile cache; for bf16 runs, the pinned SDK's full-bf16 mechanism.

    XLA_USE_BF16 (the T5 tutorial's) ended with Neuron 2.24; its documented replacement is the model cast to
    bfloat16 (the training program does it) with stochastic rounding on
    (https://awsdocs-neuron.readthedocs-hosted.com/en/latest/about-neuron/appnotes/torch-neuronx/migration-from-xla-downcast-bf16.html).
    """
    flags = [f"--cache_dir={spec.neuron.cache_dir}", *([spec.neuron.cc_flags] if spec.neuron.cc_flags else [])]
    env = {"NEURON_CC_FLAGS": " ".join(flags)}
    if spec.precision == "bf16":
        env[STOCHASTIC_ROUNDING] = "1"
    return env


#: the tutorial scripts' precompile trial: `--max_steps 100 --max_eval_samples 100` on the real command
PRECOMPILE_EVAL_SAMPLES = 100


def precompile_spec(spec: RunSpec) -> RunSpec:
    """The real run, cut short as the tutorial's precompile trial is (`--max_steps 100 --max_eval_samples 100` on
    the same command), nothing else changed: same batch, gradient accumulation, lengths, eval split and schedule,
    so the graphs it traces are the ones the real run uses. No generation (it cannot trace under
    neuron_parallel_compile), no checkpoints."""
    data = spec.model_dump(mode="json")
    data["train"].update(max_steps=spec.neuron.precompile_steps, save_steps=None, predict_with_generate=False)
    data["dataset"]["max_eval_samples"] = min(
        spec.dataset.max_eval_samples or PRECOMPILE_EVAL_SAMPLES, PRECOMPILE_EVAL_SAMPLES
    )
    return RunSpec.model_validate(data)


def predict_env(spec: RunSpec) -> dict[str, str]:
    """No Neuron devices, and every core of the instance for generation on CPU (the training stages keep one
    thread per worker; the tutorial's predict runs with torch's default, one thread per physical core)."""
    env = dict(PREDICT_ENV)
    try:
        vcpus = catalog_instance(str(spec.hardware.instance_type)).vcpus
    except CatalogError:
        return env
    env["OMP_NUM_THREADS"] = str(max(vcpus // THREADS_PER_CORE, 1))
    return env


def precompile_stage(spec: RunSpec, port: int) -> Stage:
    if spec.script is not None:  # the user's script shortens itself when NEURON_PARALLEL_COMPILE=1, as the tutorial's
        program = program_args(spec)
    else:
        program = [
            *program_args(spec, f"{PRECOMPILE_DIR}/spec.json"),
            "--metrics",
            f"{PRECOMPILE_DIR}/metrics.jsonl",
            "--output-dir",
            f"{PRECOMPILE_DIR}/output",
        ]
    return Stage(
        name="precompile", argv=[PARALLEL_COMPILE, *torchrun_argv(spec, program, port=port, launcher=TORCHRUN_ON_PATH)]
    )


def render(spec: RunSpec) -> Launch:
    port = rendezvous_port(spec)
    stages, files = [], {}
    if spec.neuron.precompile:
        stages.append(precompile_stage(spec, port))
        if spec.script is None:
            files[f"{PRECOMPILE_DIR}/spec.json"] = precompile_spec(spec).model_dump_json(indent=2)
    stages.append(train_stage(spec, port, launcher=TORCHRUN_ON_PATH))
    if spec.neuron.predict:
        stages.append(
            Stage(
                name="predict",
                argv=[PYTHON, "-m", "nbtoolkit.train.predict", "--spec", "spec.json"],
                env=predict_env(spec),
            )
        )
    notes = ["run inside the Neuron virtualenv (e.g. source ~/aws_neuron_venv_pytorch/bin/activate)"]
    return torchrun_launch(spec, stages, backend=NAME, env=neuron_env(spec), files=files, notes=notes)


def validate(spec: RunSpec) -> str | None:
    """The neuron block applies to Trainium runs; Neuron runs one worker per NeuronCore."""
    hardware = spec.hardware
    if spec.neuron != NeuronSpec() and hardware.accelerator != "neuron":
        return (
            f"the neuron block applies to Trainium runs, but hardware.accelerator is '{hardware.accelerator}'; "
            "set hardware.accelerator: neuron or remove the block"
        )
    if hardware.accelerator == "neuron" and spec.neuron.predict and spec.script is not None:
        return "neuron.predict runs nbtoolkit's own program; with script: set predict: false and predict in your script"
    return workers_problem(spec)


def workers_problem(spec: RunSpec) -> str | None:
    """A worker count the instance cannot run (here or as a SageMaker Trainium job)."""
    hardware = spec.hardware
    workers = NEURON_WORKERS.get(str(hardware.instance_type).removeprefix("ml."))
    if hardware.accelerator == "neuron" and workers and hardware.devices not in workers:
        return (
            f"hardware.devices {hardware.devices} does not fit {hardware.instance_type}: Neuron runs one worker "
            f"per NeuronCore, use {', '.join(map(str, workers))}"
        )
    return None


def neuron_cores(neuron_ls_output: str) -> int | None:
    """Total NeuronCores in `neuron-ls` output: the sum of its table's CORES column."""
    column, total = None, 0
    for line in neuron_ls_output.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if column is None and "CORES" in cells:
            column = cells.index("CORES")
        elif column is not None and len(cells) > column and cells[0].isdigit() and cells[column].isdigit():
            total += int(cells[column])
    return total or None


def preflight(spec: RunSpec) -> None:
    """Off Trainium (no neuron-ls), refuse with the way out: export the scripts for a trn1 instance."""
    if shutil.which(NEURON_LS) is None:
        raise LaunchError(
            "hardware.accelerator 'neuron' needs a Trainium instance, but neuron-ls is not on PATH here; "
            "start the job on a trn1 instance, or write its scripts to copy there with `nbtoolkit launch-files SPEC`"
        )
    tools = [
        *TORCHRUN_ON_PATH,
        *([PARALLEL_COMPILE] if spec.neuron.precompile else []),
        *([PYTHON] if spec.neuron.predict else []),
    ]
    missing = [tool for tool in tools if shutil.which(tool) is None]
    if missing:
        raise LaunchError(
            f"{', '.join(missing)} not on PATH; activate the Neuron virtualenv before starting the job "
            "(e.g. source ~/aws_neuron_venv_pytorch/bin/activate)"
        )
    listing = subprocess.run([NEURON_LS], capture_output=True, text=True, timeout=60)
    cores = neuron_cores(listing.stdout)
    if cores is not None and spec.hardware.devices > cores:
        raise LaunchError(
            f"hardware.devices {spec.hardware.devices} is more workers than the {cores} NeuronCores "
            f"neuron-ls shows here; use at most {cores}"
        )
