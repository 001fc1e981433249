"""RunSpec: the one description of a fine-tuning run.

Every front (form, `%%finetune`, YAML, CLI) produces a RunSpec; every later stage (planner,
backends, jobs) reads one. Cross-field rules live here so each front shows the same sentence.
This module is the spec's public face: the core's blocks are nbtoolkit.spec_parts.blocks, a spec's YAML as
read nbtoolkit.spec_parts.yaml_reading, its error and warning nbtoolkit.spec_parts.errors; each is named here too.
"""

from __future__ import annotations

import difflib
import json
import re
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import yaml
from pydantic import BaseModel, Field, ValidationError, ValidationInfo, create_model, field_validator, model_validator

from nbtoolkit import backends
from nbtoolkit.inputs.chat_formats import NAMED_TEMPLATES, assistant_only_loss, has_generation_markers, no_markers
from nbtoolkit.spec_parts.block import SpecBlock
from nbtoolkit.spec_parts.blocks import (
    DEEPSPEED_TUTORIAL_CONFIGS,
    PREFERENCE_LOSS_TYPES,
    AdapterSpec,
    Compile,
    DatasetSpec,
    DeepSpeedConfigName,
    HardwareSpec,
    LocalPath,
    Offload,
    ParallelismSpec,
    Precision,
    PreferenceSpec,
    RewardSpec,
    ScriptSpec,
    ShippedFunction,
    Strategy,
    Task,
    Tracker,
    TrainSpec,
)
from nbtoolkit.spec_parts.errors import SpecError, SpecWarning
from nbtoolkit.spec_parts.extra import extra_problem
from nbtoolkit.spec_parts.yaml_reading import CORE_SCHEMA, SpecLoader, merged, parse_settings, read_yaml
from nbtoolkit.tasks import TASKS, TRL_TASKS, hook
from nbtoolkit.tasks import Task as TaskFacts
from nbtoolkit.trained_model.saved_folders import is_adapter_folder

__all__ = [
    "CORE_SCHEMA",
    "DEEPSPEED_TUTORIAL_CONFIGS",
    "PREFERENCE_LOSS_TYPES",
    "SAFE_NAME",
    "TYPO_CUTOFF",
    "AdapterSpec",
    "Compile",
    "DatasetSpec",
    "DeepSpeedConfigName",
    "HardwareSpec",
    "LocalPath",
    "Offload",
    "ParallelismSpec",
    "Precision",
    "PreferenceSpec",
    "RewardSpec",
    "RunSpec",
    "RunSpecCore",
    "ScriptSpec",
    "ShippedFunction",
    "SpecError",
    "SpecLoader",
    "SpecWarning",
    "Strategy",
    "Task",
    "Tracker",
    "TrainSpec",
    "closest_field",
    "explain",
    "load_spec",
    "merged",
    "parse_settings",
    "read_yaml",
    "safe_name",
    "spec_warnings",
]

#: what a spec's `name` may be: it becomes folder and file names
SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def safe_name(text: str, limit: int = 80) -> str:
    """`text` made a valid spec name: other characters become '-'."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-._")[:limit] or "run"


def _dataset_fields_named_by(task: TaskFacts) -> list[str]:
    """The dataset block's fields a task's facts name: its columns, its own fields and its preview note's."""
    noted = re.findall(r"\{data\.(\w+)", task.preview_note)
    return [*task.columns, *task.dataset_fields, *noted]


def _no_dataset_field(task: TaskFacts) -> str | None:
    missing = next((name for name in _dataset_fields_named_by(task) if name not in DatasetSpec.model_fields), None)
    if missing is None:
        return None
    columns = ", ".join(name for name in DatasetSpec.model_fields if name.endswith("_column"))
    return (
        f"task '{task.name}' cannot be used: it names dataset.{missing}, a field the spec's dataset block does not "
        f"have; its package must name the block's own fields (the columns: {columns})"
    )


#: task -> why no spec of it can be built: the registry cannot import the dataset block (the block imports it), so
#: its facts that name the block's fields are checked here, once
TASKS_NAMING_NO_DATASET_FIELD = {name: problem for name, task in TASKS.items() if (problem := _no_dataset_field(task))}


class RunSpecCore(SpecBlock):
    """A fine-tuning run: what to train, on what data, where, and how (RunSpec adds the backends' blocks)."""

    name: str | None = Field(None, max_length=80, description="the job's name in listings; default <task>-<model>")
    task: Task = Field(description="what the model learns; the data columns and metrics follow from it")
    model: LocalPath | None = Field(
        None,
        description="hub id, local path, or job:ID / job:NAME (an earlier job's model); omitted -> bundled tiny model",
    )
    dataset: DatasetSpec = Field(default_factory=DatasetSpec, description="where the examples come from")
    hardware: HardwareSpec = Field(default_factory=HardwareSpec, description="where the run executes, on which devices")
    parallelism: ParallelismSpec = Field(
        default_factory=ParallelismSpec, description="how several devices share the work"
    )
    precision: Precision = Field("fp32", description="the training precision; bf16 needs a device that has it")
    compile: Compile = Field("none", description="torch: torch.compile the model; neuron: compile for Trainium")
    launcher: str = Field(
        "auto", description="the backend that starts the run; auto: chosen from target, accelerator and parallelism"
    )
    train: TrainSpec = Field(default_factory=TrainSpec, description="the Trainer's hyperparameters")
    script: ScriptSpec | None = Field(None, description="your own training script, run instead of nbtoolkit's program")
    resume: LocalPath | None = Field(None, description="'latest' or a checkpoint directory")
    extra: dict[str, Any] = Field(default_factory=dict, description="passed through to TrainingArguments")
    adapter: AdapterSpec | None = Field(None, description="LoRA/QLoRA adapters instead of a full fine-tune")
    report_to: list[Tracker] = Field(default_factory=list, description="experiment trackers; default none")
    preference: PreferenceSpec | None = Field(None, description="task preference: the method and its beta")
    reward: RewardSpec | None = Field(None, description="task grpo: reward functions and sampling")

    @field_validator("name")
    @classmethod
    def _safe_name(cls, name: str | None) -> str | None:
        if name is not None and not SAFE_NAME.fullmatch(name):
            raise ValueError(
                f"name {name!r} may hold only letters, digits, '.', '_' and '-' and start with a letter "
                "or digit (e.g. bert-emotion-v2): it names the job's folders and exports"
            )
        return name

    @field_validator("task")
    @classmethod
    def _task_reads_real_dataset_fields(cls, task: str) -> str:
        problem = TASKS_NAMING_NO_DATASET_FIELD.get(task)
        if problem:
            raise ValueError(problem)
        return task

    @field_validator("launcher")
    @classmethod
    def _registered_launcher(cls, launcher: str) -> str:
        if launcher != "auto" and launcher not in backends.names():
            raise ValueError(
                f"launcher '{launcher}' is not available here; use auto or one of {', '.join(backends.names())}"
            )
        return launcher

    @field_validator("extra")
    @classmethod
    def _outputs_stay_in_the_job(cls, extra: dict[str, Any]) -> dict[str, Any]:
        if "output_dir" in extra:
            raise ValueError(
                "extra.output_dir cannot be set: a job keeps its outputs in its own folder (output/), "
                "where resume finds its checkpoints; remove it"
            )
        return extra

    @model_validator(mode="before")
    @classmethod
    def _design_yaml_aliases(cls, data: Any) -> Any:
        """Accept `sagemaker.instance_type/instance_count` (the house YAML) as hardware fields."""
        if not isinstance(data, dict) or not isinstance(data.get("sagemaker"), dict):
            return data
        data = dict(data)
        sagemaker = dict(data["sagemaker"])
        hardware = dict(data.get("hardware") or {})
        for alias, field in (("instance_type", "instance_type"), ("instance_count", "nodes")):
            if alias in sagemaker:
                value = sagemaker.pop(alias)
                if field in hardware and hardware[field] != value:
                    raise ValueError(
                        f"sagemaker.{alias} {value!r} disagrees with hardware.{field} {hardware[field]!r}; give it once"
                    )
                hardware[field] = value
        data["sagemaker"], data["hardware"] = sagemaker, hardware
        return data

    @model_validator(mode="after")
    def _cross_field_rules(self, info: ValidationInfo) -> RunSpec:
        hw, par = self.hardware, self.parallelism
        if par.strategy in ("xla",) or self.compile == "neuron":
            field, value = ("parallelism.strategy", "xla") if par.strategy == "xla" else ("compile", "neuron")
            if hw.accelerator != "neuron":
                raise ValueError(
                    f"{field} '{value}' needs a Neuron accelerator (hardware.accelerator is '{hw.accelerator}'); "
                    "set hardware.accelerator: neuron"
                )
        if self.compile == "torch" and hw.accelerator == "neuron":
            raise ValueError("compile 'torch' does not apply on Neuron; use compile: neuron")
        if hw.accelerator == "neuron" and TASKS[self.task].trl:
            # TRL's 1.x trainers need transformers 4.56.2 or newer; installing them over the SDK's stack replaces it
            raise ValueError(
                f"task {self.task} is trained by TRL, whose trainers need transformers 4.56.2 or newer, while Neuron "
                "SDK 2.26 holds transformers at 4.55.4 (optimum-neuron 0.4.1): train it on GPUs "
                "(hardware.accelerator: cuda)"
            )
        if par.strategy in ("smddp", "smp") and hw.target != "sagemaker":
            raise ValueError(
                f"parallelism.strategy '{par.strategy}' runs only on SageMaker (hardware.target is '{hw.target}'); "
                "use ddp or deepspeed locally"
            )
        if hw.accelerator == "cpu" and self.precision == "fp16":
            raise ValueError("precision 'fp16' needs a cuda or neuron accelerator; use bf16 or fp32 on cpu")
        single = self.launcher in ("local",)
        if single and hw.devices * hw.nodes > 1:
            raise ValueError(
                f"launcher 'local' runs one process, but hardware asks for {hw.devices * hw.nodes}; "
                "use launcher torchrun or deepspeed, or devices: 1"
            )
        if self.launcher == "deepspeed" and par.strategy != "deepspeed":
            raise ValueError(f"launcher 'deepspeed' needs parallelism.strategy 'deepspeed' (it is '{par.strategy}')")
        if par.strategy in ("ddp", "deepspeed") and self.launcher == "local":
            launchers = "torchrun or deepspeed" if par.strategy == "deepspeed" else "torchrun"
            raise ValueError(f"parallelism.strategy '{par.strategy}' needs launcher {launchers} (or auto), not local")
        if par.deepspeed_config and par.deepspeed_config.endswith("_bf16") != (self.precision == "bf16"):
            wanted = "bf16" if par.deepspeed_config.endswith("_bf16") else "fp32 or fp16"
            raise ValueError(
                f"parallelism.deepspeed_config '{par.deepspeed_config}' trains in {wanted}, but precision is "
                f"'{self.precision}'; change precision or pick the config "
                f"{'without' if self.precision != 'bf16' else 'with'} _bf16"
            )
        if self.adapter is not None and self.adapter.type == "qlora" and hw.accelerator != "cuda":
            raise ValueError(
                f"adapter.type 'qlora' loads the base model in 4 bits with bitsandbytes, which needs a "
                f"cuda accelerator (hardware.accelerator is '{hw.accelerator}'); use type: lora"
            )
        if self.adapter is not None and self.script is not None:
            raise ValueError(
                "adapter applies to nbtoolkit's own training program; with script: add the adapter "
                "in your script, or remove the adapter block"
            )
        if self.model and "://" in self.model and not (self.model.startswith("s3://") and hw.target == "sagemaker"):
            raise ValueError(
                f"model '{self.model}' is a URL, which only a SageMaker job reads (an s3:// model.tar.gz, as its "
                "input channel); give a hub id, a local model folder, or job:ID for an earlier job's model"
            )
        if self.train.budget_usd is not None and hw.run_price_usd is None:
            raise ValueError(
                f"train.budget_usd needs a price to count against: set hardware.hourly_price_usd (USD per "
                f"instance-hour){', or an instance_type the catalog prices' if not hw.instance_type else ''}"
            )
        if self.train.budget_usd is not None and self.script is not None:
            raise ValueError(
                "train.budget_usd is kept by nbtoolkit's own training program; with script: stop your "
                "script at its budget yourself, or remove train.budget_usd"
            )
        for owner in TASKS.values():
            if owner.block and getattr(self, owner.block) is not None and owner.block != TASKS[self.task].block:
                raise ValueError(
                    f"the {owner.block} block applies to task {owner.name} (task is '{self.task}'); remove it"
                )
        if self.reward is not None and self.reward.use_vllm and hw.accelerator != "cuda":
            raise ValueError(
                f"reward.use_vllm needs a cuda accelerator (hardware.accelerator is '{hw.accelerator}'); "
                "remove it to generate with transformers"
            )
        if self.dataset.packing and "dataset.packing" not in TASKS[self.task].set_by_field.values():
            packing = [name for name, task in TASKS.items() if "dataset.packing" in task.set_by_field.values()]
            raise ValueError(
                f"dataset.packing applies to task {' or '.join(packing)}; task {self.task} does not pack its "
                "examples, so it would be ignored: remove it"
            )
        problem = extra_problem(self.task, self.extra)
        if problem:
            raise ValueError(problem)
        template = self.dataset.chat_template
        custom = template if template is not None and template not in NAMED_TEMPLATES else None
        if custom and assistant_only_loss(self.task, self.extra) and not has_generation_markers(custom):
            raise ValueError(no_markers("dataset.chat_template"))
        own_rule = TASKS[self.task].spec_rule
        problem = hook(own_rule)(self) if own_rule else None
        if problem:
            raise ValueError(problem)
        if self.resume is not None and self.resume != "latest" and not self.resume.strip():
            raise ValueError("resume must be 'latest' or a checkpoint directory")
        spec = cast("RunSpec", self)  # the rules run on RunSpec: this core with the backends' blocks
        if (info.context or {}).get(LAUNCHED):  # read where it runs: its backend checked it at launch
            return spec
        found = backends.problem(spec)
        if found:
            raise ValueError(found)
        for message in spec_warnings(spec):
            warnings.warn(message, SpecWarning, stacklevel=2)
        return spec

    # -- convenience -------------------------------------------------------------------------

    @property
    def model_name(self) -> str:
        """The model to load: the spec's, or the bundled tiny model for the task."""
        return self.model or TASKS[self.task].bundled_model

    @property
    def gradient_checkpointing(self) -> bool:
        """train.gradient_checkpointing, or the task's default: on where TRL's configs turn it on (chat, DPO, GRPO)."""
        chosen = self.train.gradient_checkpointing
        return self.task in TRL_TASKS if chosen is None else chosen

    @property
    def display_name(self) -> str:
        return self.name or f"{self.task}-{Path(self.model_name).name}"

    @property
    def world_size(self) -> int:
        return self.hardware.devices * self.hardware.nodes

    @property
    def generates_in_evaluation(self) -> bool:
        """A summarization's evaluation generates (for ROUGE) unless train.predict_with_generate says no; by default
        not on Neuron, which would compile a graph for every generated length."""
        if not TASKS[self.task].evaluation_generates:
            return False
        chosen = self.train.predict_with_generate
        return chosen if chosen is not None else self.hardware.accelerator != "neuron"

    @property
    def extras_used(self) -> tuple[str, ...]:
        """The optional extras of the distribution (pyproject.toml) this run needs: DeepSpeed's, PEFT's (an adapter
        to train, or an earlier run's adapter to merge as the model loads: a model in S3 may be one)."""
        starts_from_adapter = self.model is not None and (
            self.model.startswith("s3://") or is_adapter_folder(self.model)
        )
        return tuple(
            name
            for name, used in (
                ("deepspeed", self.parallelism.strategy == "deepspeed"),
                ("adapters", self.adapter is not None or starts_from_adapter),
                ("chat", self.task in TRL_TASKS),
            )
            if used
        )

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.to_dict(), sort_keys=False)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    def to_dict(self) -> dict[str, Any]:
        """Only what differs from the defaults, so a saved spec reads like the one the user wrote."""
        return self.model_dump(mode="json", exclude_defaults=True)


def _with_backend_blocks() -> type[RunSpecCore]:
    """RunSpec: the core and each registered backend's block under the backend's name (`sagemaker:`, ...)."""
    blocks: dict[str, Any] = {}
    for backend in sorted(backends.registered().values(), key=lambda backend: backend.name):
        if backend.block is not None:
            about = f"settings of the {backend.name} backend (its block below)"
            # an absent block is left out of a saved spec: installing a backend changes no spec.json (and so
            # no rendezvous id, which every node of a run must agree on)
            blocks[backend.name] = (
                (backend.block, Field(default_factory=backend.block, description=about))
                if backend.block_by_default
                else (backend.block | None, Field(None, exclude_if=lambda block: block is None, description=about))
            )
    return create_model("RunSpec", __base__=RunSpecCore, __module__=__name__, __doc__=RunSpecCore.__doc__, **blocks)


if TYPE_CHECKING:

    class RunSpec(RunSpecCore):
        """What a type checker sees: the core's fields, and the backends' blocks by name (known only at run time)."""

        def __getattr__(self, block: str) -> Any: ...

else:
    RunSpec = _with_backend_blocks()


def spec_warnings(spec: RunSpec) -> list[str]:
    """Advice for specs that run but probably not as hoped."""
    found = []
    if spec.precision == "fp16" and "t5" in spec.model_name.lower():
        found.append("precision 'fp16' with a T5 model often overflows to NaN loss; prefer bf16 (or fp32)")
    offloads = spec.parallelism.offload_params != "none" or spec.parallelism.offload_optimizer != "none"
    if offloads and spec.hardware.accelerator == "cpu":
        found.append("offload moves states to CPU memory; on a CPU-only run it saves nothing and costs time")
    if (
        spec.script is not None
        and spec.parallelism.strategy == "deepspeed"
        and spec.hardware.accelerator == "cpu"
        and spec.world_size > 1
        and "--use_cpu" not in spec.script.args
    ):
        found.append(
            "DeepSpeed on CPU: add --use_cpu to script.args (TrainingArguments use_cpu=True), "
            "else the script's ranks do not train together"
        )
    if spec.compile == "torch" and not spec.dataset.pad_to_max_length:
        found.append(
            "compile 'torch' with dynamic padding recompiles for each new shape; set dataset.pad_to_max_length: true"
        )
    return found


# -- loading -----------------------------------------------------------------------------------


#: the validation context's key of a launched run's spec (load_spec's `launched`)
LAUNCHED = "launched"


def load_spec(source: RunSpec | dict[str, Any] | str | Path, *, launched: bool = False) -> RunSpec:
    """Build a RunSpec from a dict, a YAML/JSON text, or a path to a .yaml/.json file.

    `launched`: the spec of a run already launched, read where it runs (the training program): its backend's
    checks (which may need the launch side's libraries, such as the SageMaker SDK's image table, absent from a
    container) and its warnings were the launch's, and are not repeated. Raises SpecError with one sentence
    (field, bad value, what would be valid).
    """
    if isinstance(source, RunSpec):
        return source
    data = source
    if isinstance(source, Path) or (isinstance(source, str) and _looks_like_path(source)):
        path = Path(source)
        if not path.is_file():
            raise SpecError(f"spec file {path} does not exist")
        data = path.read_text()
    if isinstance(data, str):
        try:
            data = read_yaml(data)  # JSON is YAML too
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" at line {mark.line + 1}" if mark else ""
            raise SpecError(f"the spec is not valid YAML{where}: {getattr(exc, 'problem', exc)}") from None
    if not isinstance(data, dict):
        raise SpecError("the spec must be a mapping with at least a 'task' key, e.g. task: text-classification")
    try:
        return RunSpec.model_validate(data, context={LAUNCHED: True} if launched else None)
    except ValidationError as exc:
        raise SpecError(explain(exc)) from None


def _looks_like_path(text: str) -> bool:
    return "\n" not in text and text.strip().endswith((".yaml", ".yml", ".json"))


#: how alike a misspelt field and a valid one must be (difflib's ratio, lengths within a quarter) to be offered:
#: trian ~ train is 0.8, learnig_rate ~ learning_rate 0.96
TYPO_CUTOFF = 0.75


def explain(exc: ValidationError) -> str:
    """The first problem of a ValidationError as one sentence a user can act on."""
    error = exc.errors()[0]
    location = ".".join(str(part) for part in error["loc"])
    kind, message = error["type"], error["msg"]
    given = error.get("input")
    context = error.get("ctx") or {}
    if kind == "value_error":  # our own validators' sentences name their field; a value's check is given it
        said = str(context.get("error", message))
        return said if location in said else f"{location} {said}"
    if kind == "missing":
        return f"{location} is missing; it is required"
    if kind == "extra_forbidden":
        parent, _, name = location.rpartition(".")
        valid = _field_names(parent)
        close = closest_field(parent, name, valid)
        meant = f" (did you mean {close}?)" if close else ""
        return f"{location} is not a known field{meant}; valid fields{' of ' + parent if parent else ''} are " + (
            ", ".join(valid)
        )
    if kind == "literal_error":
        return f"{location}: {given!r} is not valid; expected {context.get('expected')}"
    if kind == "finite_number":  # SpecBlock refuses NaN and infinity
        return f"{location}: {given!r} is not a finite number; give a number (NaN and infinity are not)"
    if kind in ("greater_than_equal", "less_than_equal", "greater_than", "less_than"):
        bound = {"greater_than_equal": ">=", "less_than_equal": "<=", "greater_than": ">", "less_than": "<"}[kind]
        return f"{location}: {given!r} is out of range; it must be {bound} {next(iter(context.values()))}"
    if kind == "model_type":
        return f"{location}: {given!r} is not valid; expected a mapping with the fields {', '.join(_field_names(location))}"
    return f"{location}: {given!r} is not valid ({message.lower()})"


def closest_field(parent: str, name: str, valid: list[str]) -> str | None:
    """The dotted field a misspelt one most likely meant: the most alike at its level, else (at the top) a block's
    field of that very name (`epochs` for train.epochs)."""
    alike = [field for field in valid if abs(len(field) - len(name)) <= max(1, len(name) // 4)]  # queue: not requeue
    close = difflib.get_close_matches(name.lower(), alike, n=1, cutoff=TYPO_CUTOFF)
    if close:
        return f"{parent}.{close[0]}" if parent else close[0]
    if parent:
        return None
    return next((f"{block}.{name}" for block in valid if _is_block(block) and name in _field_names(block)), None)


def _is_block(name: str) -> bool:
    annotation = RunSpec.model_fields[name].annotation
    return any(
        isinstance(arg, type) and issubclass(arg, BaseModel) for arg in getattr(annotation, "__args__", (annotation,))
    )


def _field_names(dotted: str) -> list[str]:
    model: type[BaseModel] = RunSpec
    for part in dotted.split("."):
        if not part or part.isdigit():  # an item of a list of blocks: its fields are the block's
            continue
        annotation = model.model_fields[part].annotation
        model = next(arg for arg in getattr(annotation, "__args__", (annotation,)) if isinstance(arg, type))
    return list(model.model_fields)
