"""RunSpec: the one description of a fine-tuning run.

Every front (form, `%%finetune`, YAML, CLI) produces a RunSpec; every later stage (planner,
backends, jobs) reads one. Cross-field rules live here so each front shows the same sentence.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, cast

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    Field,
    SerializerFunctionWrapHandler,
    ValidationError,
    ValidationInfo,
    create_model,
    field_validator,
    model_serializer,
    model_validator,
)

from nbtoolkit import backends, catalog
from nbtoolkit.adapters import ALL_LINEAR
from nbtoolkit.chat_formats import (
    NAMED_TEMPLATES,
    ChatFormat,
    assistant_only_loss,
    has_generation_markers,
    no_markers,
    template_syntax_error,
)
from nbtoolkit.reward_names import BUNDLED_REWARDS, defined_names
from nbtoolkit.saved_models import is_adapter_folder
from nbtoolkit.spec_block import SpecBlock
from nbtoolkit.spec_extra import extra_problem
from nbtoolkit.tasks import TASK_NAMES, TASKS, TRL_TASKS

if TYPE_CHECKING:  # the names are data (tasks.py, deepspeed_configs): a checker sees text
    Task = str
    DeepSpeedConfigName = str
else:
    Task = Literal[TASK_NAMES]
Strategy = Literal["none", "ddp", "deepspeed", "smddp", "smp", "xla"]
Precision = Literal["fp32", "bf16", "fp16"]
Compile = Literal["none", "torch", "neuron"]
Offload = Literal["none", "cpu", "nvme"]
Tracker = Literal["tensorboard", "mlflow", "wandb", "trackio"]


def _home_known(path: str) -> str:
    """A `~user/...` path must name a home folder of this machine: launches expand it before they run."""
    if path.startswith("~") and os.path.expanduser(path) == path:
        user = path[1:].split("/", 1)[0]
        raise ValueError(
            f"{path!r} starts with ~{user}, but there is no "
            + (f"user {user!r}" if user else "home folder")
            + " here; write the folder's full path"
        )
    return path


#: a local path as written in a spec (relative or with `~`), checked to be expandable here
LocalPath = Annotated[str, AfterValidator(_home_known)]

#: The DeepSpeed configs of the FLAN-T5 XL/XXL tutorial, by file name: where each offloads
#: (ZeRO-3 all). Names ending in _bf16 train in bf16; the others in fp16 (GPU) or fp32.
DEEPSPEED_TUTORIAL_CONFIGS: dict[str, Offload] = {
    "ds_flan_t5_z3_config": "none",
    "ds_flan_t5_z3_config_bf16": "none",
    "ds_flan_t5_z3_offload": "cpu",
    "ds_flan_t5_z3_offload_bf16": "cpu",
}
if not TYPE_CHECKING:
    DeepSpeedConfigName = Literal[tuple(DEEPSPEED_TUTORIAL_CONFIGS)]

#: what a spec's `name` may be: it becomes folder and file names
SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def safe_name(text: str, limit: int = 80) -> str:
    """`text` made a valid spec name: other characters become '-'."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-._")[:limit] or "run"


class SpecError(ValueError):
    """A spec that cannot run; its message is the one sentence a user reads."""


class SpecWarning(UserWarning):
    """A spec that runs but probably not as the user hopes (e.g. fp16 overflow in T5)."""


class DatasetSpec(SpecBlock):
    """Where the examples come from and which columns mean what."""

    name: str | None = Field(None, description="hub dataset id, e.g. philschmid/emotion")
    config: str | None = Field(None, description="hub dataset config, e.g. 3.0.0 for cnn_dailymail")
    files: dict[str, LocalPath] | None = Field(None, description="split -> local json/jsonl/csv/parquet file")
    train_split: str = Field("train", description="the split trained on")
    eval_split: str | None = Field("validation", description="the split evaluated; null: no evaluation")
    text_column: str | None = Field(
        None, description="the input text; default the task's (text, or article for summarization)"
    )
    text_pair_column: str | None = Field(
        None, description="text-classification: a second text, classified as a pair with the first"
    )
    label_column: str | None = Field(None, description="text-classification: the label; default label")
    question_column: str | None = Field(None, description="question-answering: the question; default question")
    context_column: str | None = Field(None, description="question-answering: the passage; default context")
    answer_column: str | None = Field(
        None, description="question-answering: {text, answer_start} as SQuAD has it; default answers"
    )
    summary_column: str | None = Field(None, description="summarization: the target summary; default highlights")
    prompt_template: str | None = Field(None, description="e.g. 'Summarize: {input}'; {input} is the text")
    max_length: int = Field(128, ge=8, le=65536, description="max source tokens (block size for causal-lm)")
    max_target_length: int = Field(64, ge=1, le=65536, description="summarization: max target tokens")
    doc_stride: int = Field(
        32, ge=1, description="question-answering: tokens shared by the windows a long context is cut into"
    )
    max_train_samples: int | None = Field(None, ge=1, description="train on at most this many examples")
    max_eval_samples: int | None = Field(None, ge=1, description="evaluate on at most this many examples")
    pad_to_max_length: bool = Field(False, description="fixed shapes (compiled and Neuron runs need them)")
    format: ChatFormat = Field("auto", description="chat: messages, sharegpt, alpaca or prompt-completion rows")
    chat_template: str | None = Field(
        None, description=f"chat: a Jinja chat template, or one by name ({', '.join(NAMED_TEMPLATES)}) for base models"
    )
    packing: bool = Field(False, description="chat: pack conversations into blocks of max_length tokens")

    @field_validator("chat_template")
    @classmethod
    def _template_or_name(cls, value: str | None) -> str | None:
        if value is None or value in NAMED_TEMPLATES:
            return value
        if "{{" not in value and "{%" not in value:
            raise ValueError(
                f"dataset.chat_template {value!r} is neither a Jinja template nor a named one; "
                f"use one of {', '.join(NAMED_TEMPLATES)} or give the template text"
            )
        error = template_syntax_error(value)
        if error:
            raise ValueError(
                f"dataset.chat_template is not a valid Jinja template ({error}); fix it or use a named one"
            )
        return value

    @model_validator(mode="after")
    def _one_source(self) -> DatasetSpec:
        if self.name and self.files:
            raise ValueError("give either dataset.name (a hub dataset) or dataset.files (local files), not both")
        if self.files and self.train_split not in self.files:
            raise ValueError(
                f"dataset.files has no '{self.train_split}' split (it has {', '.join(sorted(self.files))}); "
                "name the training file under that key or set dataset.train_split"
            )
        return self


class HardwareSpec(SpecBlock):
    """Where the run executes: this machine or SageMaker, on which devices."""

    target: str = Field(
        "local", description="'local' (this machine, or others by run.sh) or a remote engine's backend, e.g. sagemaker"
    )
    accelerator: Literal["cpu", "cuda", "neuron"] = Field("cpu", description="the device kind every process uses")
    devices: int = Field(1, ge=1, le=1024, description="processes (devices) per node")
    nodes: int = Field(1, ge=1, le=4096, description="machines the run spans")
    node_rank: int = Field(
        0, ge=0, description="this machine's place among the nodes (0: the first), for a multi-node run started by hand"
    )
    master_addr: str = Field(
        "127.0.0.1", description="the first node's address, where the nodes meet (multi-node runs)"
    )
    master_port: int | None = Field(None, ge=1, le=65535, description="chosen free when omitted")
    instance_type: str | None = Field(None, description="e.g. ml.p4d.24xlarge, trn1.2xlarge")
    hourly_price_usd: float | None = Field(None, ge=0, description="overrides the catalog price")

    @field_validator("target")
    @classmethod
    def _registered_target(cls, target: str) -> str:
        if target not in backends.targets():
            raise ValueError(
                f"hardware.target '{target}' is not available here; use one of {', '.join(backends.targets())}"
            )
        return target

    @model_validator(mode="before")
    @classmethod
    def _devices_follow_the_instance(cls, data: Any) -> Any:
        """A named instance type brings its accelerator and all its devices, unless the spec says otherwise.

        One rule for planner, form, dry run and launch: a p4d.24xlarge run is 8 processes per node,
        a trn1.32xlarge run 32 Neuron workers. An instance the catalog does not know changes nothing
        (the planner and the SageMaker checks name it). A spec that keeps `accelerator: cpu` on a
        local instance runs one CPU process, as before.
        """
        if not isinstance(data, dict) or not data.get("instance_type"):
            return data
        try:
            instance = catalog.instance(str(data["instance_type"]))
        except catalog.CatalogError:
            return data
        data = {"accelerator": instance.device.kind, **data}
        if "devices" not in data and (data["accelerator"] != "cpu" or data.get("target") == "sagemaker"):
            data["devices"] = instance.devices
        return data

    @model_serializer(mode="wrap")
    def _keep_what_the_instance_would_change(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """With an instance type, the accelerator and devices stay in the saved spec even at their defaults:
        loaded again, the spec would otherwise take the instance's."""
        data = handler(self)
        if self.instance_type:
            data.setdefault("accelerator", self.accelerator)
            data.setdefault("devices", self.devices)
        return data

    @property
    def instance_price_usd(self) -> float | None:
        """USD per instance-hour: hourly_price_usd, else the catalog's price of instance_type (None: unknown)."""
        if self.hourly_price_usd is not None:
            return self.hourly_price_usd
        if not self.priced_by_catalog:
            return None
        return catalog.hourly_price(self.instance_type) if self.instance_type else None

    @property
    def priced_by_catalog(self) -> bool:
        """The catalog's price of instance_type is what the nodes cost; not on a cluster (e.g. Slurm), where
        instance_type is only the nodes' shape."""
        remote = backends.serving(self.target)
        return remote is None or remote.priced_by_catalog

    @property
    def run_price_usd(self) -> float | None:
        """USD per hour for the whole run: the instance price x nodes."""
        price = self.instance_price_usd
        return price * self.nodes if price is not None else None

    @model_validator(mode="after")
    def _rank_in_range(self) -> HardwareSpec:
        if self.node_rank >= self.nodes:
            raise ValueError(
                f"hardware.node_rank {self.node_rank} is out of range for {self.nodes} node(s); "
                f"use 0 to {self.nodes - 1}"
            )
        return self


class ParallelismSpec(SpecBlock):
    """How work is split across devices."""

    strategy: Strategy = Field(
        "none",
        description="how the processes share the work: data parallel (ddp, smddp), DeepSpeed, model parallel (smp) or xla",
    )
    zero_stage: int = Field(
        0, ge=0, le=3, description="DeepSpeed ZeRO: 1 shards optimizer states, 2 also gradients, 3 also weights"
    )
    offload_optimizer: Offload = Field(
        "none", description="DeepSpeed: keep the optimizer states in host memory (cpu) or on NVMe"
    )
    offload_params: Offload = Field(
        "none", description="DeepSpeed ZeRO-3: keep the weights in host memory (cpu) or on NVMe"
    )
    nvme_path: LocalPath | None = Field(None, description="the folder offloading to nvme writes to")
    deepspeed_config: DeepSpeedConfigName | None = Field(
        None, description="a FLAN-T5 tutorial config by name; default: generated from zero_stage and offload"
    )
    tensor_parallel_degree: int = Field(1, ge=1, description="SageMaker model parallel (smp)")
    pipeline_parallel_degree: int = Field(1, ge=1, description="SageMaker model parallel (smp)")

    @field_validator("offload_optimizer", "offload_params", mode="before")
    @classmethod
    def _bool_means_cpu(cls, value: Any) -> Any:
        return _offload(value)

    @model_validator(mode="before")
    @classmethod
    def _tutorial_config_settings(cls, data: Any) -> Any:
        """A tutorial config by name sets strategy, ZeRO stage and offload; stated values must agree."""
        name = data.get("deepspeed_config") if isinstance(data, dict) else None
        if name not in DEEPSPEED_TUTORIAL_CONFIGS:
            return data
        offload = DEEPSPEED_TUTORIAL_CONFIGS[name]
        implied = {"strategy": "deepspeed", "zero_stage": 3, "offload_optimizer": offload, "offload_params": offload}
        for field, value in implied.items():
            if field in data and _offload(data[field]) != value:
                raise ValueError(
                    f"parallelism.{field} {data[field]!r} disagrees with deepspeed_config '{name}', which sets "
                    f"{field} {value!r}; remove {field} or pick another config"
                )
        return {**data, **implied}

    @model_validator(mode="after")
    def _deepspeed_only_options(self) -> ParallelismSpec:
        if self.strategy != "deepspeed":
            for field in ("zero_stage", "offload_optimizer", "offload_params"):
                if getattr(self, field) not in (0, "none"):
                    raise ValueError(
                        f"parallelism.{field} needs strategy 'deepspeed' (strategy is '{self.strategy}'); "
                        "set strategy: deepspeed or remove it"
                    )
        if self.offload_params != "none" and self.zero_stage != 3:
            raise ValueError(
                f"parallelism.offload_params '{self.offload_params}' needs ZeRO stage 3 "
                f"(zero_stage is {self.zero_stage}); set zero_stage: 3 or offload_params: none"
            )
        if self.offload_optimizer != "none" and self.zero_stage == 0:
            raise ValueError(
                f"parallelism.offload_optimizer '{self.offload_optimizer}' needs ZeRO stage 1, 2 or 3 "
                "(zero_stage is 0); raise zero_stage or set offload_optimizer: none"
            )
        if "nvme" in (self.offload_optimizer, self.offload_params) and not self.nvme_path:
            raise ValueError("parallelism.nvme_path is missing; nvme offload needs a directory on a fast local disk")
        if self.strategy != "smp" and (self.tensor_parallel_degree > 1 or self.pipeline_parallel_degree > 1):
            raise ValueError(
                f"parallelism.tensor_parallel_degree/pipeline_parallel_degree need strategy 'smp' "
                f"(strategy is '{self.strategy}')"
            )
        return self


class TrainSpec(SpecBlock):
    """Hyperparameters handed to the HF Trainer."""

    epochs: float = Field(3.0, gt=0, description="passes over the training data")
    max_steps: int | None = Field(None, ge=1, description="overrides epochs when set")
    batch_size: int = Field(8, ge=1, description="per device")
    eval_batch_size: int | None = Field(None, ge=1, description="per device; default batch_size")
    grad_accum: int = Field(1, ge=1, description="steps whose gradients add up before one optimizer step")
    learning_rate: float = Field(5e-5, gt=0, lt=1, description="AdamW's peak learning rate")
    warmup: float = Field(0.0, ge=0, description="steps (>= 1) or a ratio of all steps (< 1)")
    weight_decay: float = Field(0.0, ge=0, description="AdamW's weight decay")
    max_grad_norm: float = Field(1.0, ge=0, description="gradients are clipped to this norm; 0: no clipping")
    seed: int = Field(42, ge=0, le=2**32 - 1, description="numpy and torch take seeds of 0 to 2**32-1")
    logging_steps: int = Field(10, ge=1, description="a metrics record every N steps")
    eval_steps: int | None = Field(None, ge=1, description="evaluate every N steps; default once per epoch")
    eval_on_start: bool = Field(False, description="evaluate once before the first step too")
    save_steps: int | None = Field(None, ge=1, description="checkpoint every N steps; default no checkpoints")
    budget_usd: float | None = Field(
        None,
        gt=0,
        description="stop with a checkpoint once training has cost this "
        "much (hardware.hourly_price_usd or the catalog's price x nodes)",
    )
    on_stall: Literal["warn", "dump", "stop"] = Field(
        "dump",
        description="when no rank finishes a step for max(60 s, 10 steps): warn in the log, dump every rank's "
        "stacks into it too, or stop the job (the stacks are saved in the job folder in every case)",
    )
    on_anomaly: Literal["warn", "stop"] = Field(
        "warn",
        description="when the numbers say the run learns nothing (loss or reward NaN, gradient norm 0, a reward "
        "or loss that does not move, no reward): warn in the log and beside the final status, or stop the job",
    )
    save_total_limit: int | None = Field(2, ge=1, description="checkpoints kept; older ones are deleted")
    gradient_checkpointing: bool | None = Field(
        None,
        description="recompute activations in the backward pass: less memory, about a third more compute; "
        "default on for chat, preference and grpo (as TRL's configs have it), off otherwise",
    )
    predict_with_generate: bool | None = Field(None, description="summarization; default on except on Neuron")
    from_config: bool = Field(
        False, description="random weights from the model's config, not its pretrained ones (run_clm's --model_type)"
    )

    @field_validator("on_stall", "on_anomaly", mode="before")
    @classmethod
    def _null_is_the_default(cls, value: Any, info: ValidationInfo) -> Any:
        return cls.model_fields[info.field_name or ""].default if value is None else value


class AdapterSpec(SpecBlock):
    """Train small low-rank adapters (PEFT) instead of every weight; QLoRA also loads the base in 4 bits."""

    type: Literal["lora", "qlora"] = Field(
        "lora", description="qlora also loads the base in 4 bits (bitsandbytes, cuda)"
    )
    r: int = Field(8, ge=1, le=4096, description="rank of the low-rank update")
    alpha: float = Field(16, gt=0, description="scaling: the update is multiplied by alpha / r")
    dropout: float = Field(0.05, ge=0, lt=1, description="dropout on the adapter's input")
    target_modules: list[str] | None = Field(
        None, description="module names to wrap, or all-linear (PEFT's word); default all-linear"
    )

    @field_validator("target_modules", mode="before")
    @classmethod
    def _some_modules(cls, value: Any) -> Any:
        if value == ALL_LINEAR:
            return None  # the default, spelled as PEFT spells it
        if value is not None and not value:
            raise ValueError(
                "adapter.target_modules is empty; name at least one module, e.g. [q_proj, v_proj], "
                f"or leave it out (or write {ALL_LINEAR}) for every linear layer"
            )
        if isinstance(value, str):
            raise ValueError(
                f"adapter.target_modules {value!r} is neither a list of module names nor {ALL_LINEAR}; "
                f"write e.g. [q_proj, v_proj], or {ALL_LINEAR}"
            )
        return value


#: the loss types TRL 1.16 accepts per method: DPOTrainer's own check (trl/trainer/dpo_trainer.py, its
#: "Unknown loss type" error) and KTOConfig.loss_type's choices; orpo and simpo (CPO) set theirs themselves
PREFERENCE_LOSS_TYPES = {
    "dpo": (
        "sigmoid",
        "hinge",
        "ipo",
        "exo_pair",
        "nca_pair",
        "robust",
        "bco_pair",
        "sppo_hard",
        "aot",
        "aot_unpaired",
        "apo_zero",
        "apo_down",
        "discopop",
        "sft",
        "sigmoid_norm",
    ),
    "kto": ("kto", "apo_zero_unpaired"),
}


class PreferenceSpec(SpecBlock):
    """Preference tuning on prompt/chosen/rejected data (TRL's DPO, ORPO, CPO-SimPO and KTO trainers)."""

    method: Literal["dpo", "orpo", "simpo", "kto"] = Field(
        "dpo", description="the TRL trainer: DPO, ORPO, CPO-SimPO or KTO"
    )
    beta: float = Field(0.1, gt=0, description="how far from the reference (dpo, kto) or the odds-ratio weight")
    loss_type: str | None = Field(None, description="dpo: sigmoid (default), ipo, hinge, ...; kto: kto, ...")

    @model_validator(mode="after")
    def _a_loss_the_method_takes(self) -> PreferenceSpec:
        takes = PREFERENCE_LOSS_TYPES.get(self.method)
        if self.loss_type is not None and takes is None:
            raise ValueError(
                f"preference.loss_type applies to method dpo or kto (method is '{self.method}'); remove it"
            )
        if self.loss_type is not None and takes is not None and self.loss_type not in takes:
            raise ValueError(
                f"preference.loss_type '{self.loss_type}' is not one method {self.method} takes; "
                f"use one of {', '.join(takes)}"
            )
        return self


class ShippedFunction(SpecBlock):
    """A reward function defined in a notebook, carried in the spec as its source (nbtoolkit.rewards.ship)."""

    name: str = Field(description="the function's name, defined by its source")
    source: str = Field(description="Python source that defines the function (and what it needs)")


class RewardSpec(SpecBlock):
    """GRPO: reward functions scoring sampled completions, and how many completions to sample."""

    functions: list[str | ShippedFunction] = Field(
        default_factory=list,
        description="module:function or path/to/file.py:function; default the bundled arithmetic reward",
    )
    weights: list[float] | None = Field(None, description="one per function; default all 1")
    num_generations: int = Field(4, ge=2, description="completions sampled per prompt (the group)")
    max_completion_length: int = Field(32, ge=1, le=65536, description="tokens sampled per completion")
    temperature: float = Field(1.0, gt=0, description="sampling temperature of the completions")
    beta: float = Field(0.0, ge=0, description="KL weight; > 0 keeps a reference model")
    use_vllm: bool = Field(False, description="generate with vLLM (cuda only); default transformers")

    @field_validator("functions")
    @classmethod
    def _named_functions(cls, functions: list[str | ShippedFunction]) -> list[str | ShippedFunction]:
        for ref in functions:
            # shipped text that is not Python, or defines another name, is refused here rather than in the job
            where = f"reward.functions {getattr(ref, 'name', '')!r}: its source"
            if isinstance(ref, ShippedFunction) and ref.name not in defined_names(ref.source, where):
                raise ValueError(f"{where} defines no function {ref.name!r}")
            if isinstance(ref, str) and (":" not in ref or not all(ref.rpartition(":")[::2])):
                raise ValueError(
                    f"reward.functions {ref!r} names no function; write module:function or path/to/file.py:function"
                )
        return functions

    @model_validator(mode="after")
    def _one_weight_each(self) -> RewardSpec:
        functions = len(self.functions) or len(BUNDLED_REWARDS)
        if self.weights is not None and len(self.weights) != functions:
            which = "" if self.functions else " (the bundled default rewards)"
            raise ValueError(
                f"reward.weights has {len(self.weights)} value(s) for {functions} function(s){which}; give one each"
            )
        return self


class ScriptSpec(SpecBlock):
    """A user's own training script, run under the chosen launcher instead of nbtoolkit.train."""

    path: LocalPath = Field(
        description="the training script; `script: train.py` is short for `script: {path: train.py}`"
    )
    args: list[str] = Field(
        default_factory=list, description="its command-line arguments (numbers and booleans become text)"
    )
    source_dir: LocalPath | None = Field(None, description="directory shipped with the script (SageMaker)")
    resume_arg: str | None = Field(
        None,
        pattern=r"^-",
        description="the option the script takes a checkpoint folder with, for `nbtoolkit resume`; default "
        "--resume_from_checkpoint when the script's source reads resume_from_checkpoint",
    )

    @model_validator(mode="before")
    @classmethod
    def _path_alone(cls, data: Any) -> Any:
        """`script: train.py` is short for `script: {path: train.py}`."""
        return {"path": data} if isinstance(data, str) else data

    @field_validator("args", mode="before")
    @classmethod
    def _args_as_text(cls, args: Any) -> Any:
        """`args: [--max_steps, 60, --do_eval, true]`: YAML numbers and booleans are command-line text."""
        if not isinstance(args, list):
            return args
        return [
            str(arg).lower() if isinstance(arg, bool) else str(arg) if isinstance(arg, (int, float)) else arg
            for arg in args
        ]


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
    def _cross_field_rules(self) -> RunSpec:
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
        for block, task in (("preference", "preference"), ("reward", "grpo")):
            if getattr(self, block) is not None and self.task != task:
                raise ValueError(f"the {block} block applies to task {task} (task is '{self.task}'); remove it")
        if self.reward is not None and self.reward.use_vllm and hw.accelerator != "cuda":
            raise ValueError(
                f"reward.use_vllm needs a cuda accelerator (hardware.accelerator is '{hw.accelerator}'); "
                "remove it to generate with transformers"
            )
        problem = extra_problem(self.task, self.extra)
        if problem:
            raise ValueError(problem)
        template = self.dataset.chat_template
        custom = template if template is not None and template not in NAMED_TEMPLATES else None
        if custom and assistant_only_loss(self.task, self.extra) and not has_generation_markers(custom):
            raise ValueError(no_markers("dataset.chat_template"))
        if self.task == "grpo":
            self._whole_groups()
        own_data = self.dataset.name or self.dataset.files
        if self.task == "grpo" and own_data and not (self.reward and self.reward.functions):
            raise ValueError(
                "task grpo on your own data needs reward.functions (module:function or path/to/file.py:function); "
                "the bundled arithmetic reward fits only the bundled prompts"
            )
        if self.resume is not None and self.resume != "latest" and not self.resume.strip():
            raise ValueError("resume must be 'latest' or a checkpoint directory")
        spec = cast("RunSpec", self)  # the rules run on RunSpec: this core with the backends' blocks
        found = backends.problem(spec)
        if found:
            raise ValueError(found)
        for message in spec_warnings(spec):
            warnings.warn(message, SpecWarning, stacklevel=2)
        return spec

    def _whole_groups(self) -> None:
        """TRL's GRPOConfig rule, checked before launch: each batch of completions holds whole groups."""
        group = (self.reward or RewardSpec()).num_generations
        train, ranks = self.train, self.hardware.devices * self.hardware.nodes
        batches = [("train.batch_size x train.grad_accum", train.batch_size * train.grad_accum)]
        data = self.dataset
        if data.eval_split is not None and (not data.files or data.eval_split in data.files):
            batches.append(("train.eval_batch_size", train.eval_batch_size or train.batch_size))
        for field_name, per_rank in batches:
            if per_rank * ranks % group:
                raise ValueError(
                    f"{field_name} ({per_rank}) x {ranks} rank(s) must be divisible by reward.num_generations "
                    f"({group}), so that each batch holds whole groups of completions; change one of them"
                    + ("" if "eval" not in field_name else ", or set dataset.eval_split: null")
                )

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
        if self.task != "summarization":
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


def _offload(value: Any) -> Any:
    """`true`/`false` mean cpu/none."""
    if isinstance(value, bool):
        return "cpu" if value else "none"
    return value


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


def merged(base: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    """`base` with `changes` on top, section by section (a nested mapping changes only the keys it names)."""
    result = dict(base)
    for key, value in changes.items():
        both_mappings = isinstance(value, dict) and isinstance(result.get(key), dict)
        result[key] = merged(result[key], value) if both_mappings else value
    return result


class SpecLoader(yaml.SafeLoader):
    """YAML as a spec is read: booleans and numbers per YAML 1.2's core schema, so `args: [--save_strategy, no,
    --seed, 010, --max_time, 1:30]` keeps its words (YAML 1.1 reads no/yes/on/off as booleans, `010` as octal 8,
    `1:30` as base-60 90, `0b101` and `1_000` as numbers). A decimal with a leading zero stays text, as written,
    and a float needs its dot (`1e-5` stays text, as PyYAML always read it); typed fields still take either."""


#: YAML 1.2 core schema's booleans and numbers (PyYAML's constructors read these forms as 1.2 means them)
CORE_SCHEMA = {
    "tag:yaml.org,2002:bool": (r"true|True|TRUE|false|False|FALSE", "tTfF"),
    "tag:yaml.org,2002:int": (r"[-+]?(?:0|[1-9][0-9]*)|0o[0-7]+|0x[0-9a-fA-F]+", "-+0123456789"),
    "tag:yaml.org,2002:float": (
        r"[-+]?(?:\.[0-9]+|[0-9]+\.[0-9]*)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)",
        "-+0123456789.",
    ),
}
SpecLoader.yaml_implicit_resolvers = {
    first: [(tag, pattern) for tag, pattern in resolvers if tag not in CORE_SCHEMA]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
for _tag, (_pattern, _firsts) in CORE_SCHEMA.items():
    SpecLoader.add_implicit_resolver(_tag, re.compile(rf"^(?:{_pattern})$"), list(_firsts))


def read_yaml(text: str) -> Any:
    """A spec's YAML text (a file, a %%finetune body, a --set value) as data, booleans per YAML 1.2."""
    return yaml.load(text, Loader=SpecLoader)


def parse_settings(items: list[str]) -> dict[str, Any]:
    """`--set` items, `["train.learning_rate=1e-4", "max_steps=200"]`, as {field: value}, values read as the
    spec's YAML (numbers, true/false): one reading for the CLI, `%%finetune` and the fork buttons."""
    changes = {}
    for item in items:
        field, sep, value = item.partition("=")
        field = field.strip()
        if not sep or not field or not all(field.split(".")):
            raise SpecError(f"--set {item[:60]!r} is not FIELD=VALUE; e.g. --set train.learning_rate=1e-4")
        try:
            changes[field] = read_yaml(value)
        except yaml.YAMLError:
            raise SpecError(
                f"--set {field}: {value[:40]!r} is not a YAML value; put text that holds YAML's signs in quotes, "
                f"e.g. --set \"{field}='{value[:20]}'\""
            ) from None
    return changes


def load_spec(source: RunSpec | dict[str, Any] | str | Path) -> RunSpec:
    """Build a RunSpec from a dict, a YAML/JSON text, or a path to a .yaml/.json file.

    Raises SpecError with one sentence (field, bad value, what would be valid).
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
        return RunSpec.model_validate(data)
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
