"""The core's blocks of a spec (dataset, hardware, parallelism, train, adapter, preference, reward, script)
and the values their fields take.

Each block checks its own fields and says what is wrong in one sentence naming the field; the rules that
join blocks are the RunSpec's (nbtoolkit.spec), which gathers these blocks with the backends' own.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationInfo,
    field_validator,
    model_serializer,
    model_validator,
)

from nbtoolkit import backends
from nbtoolkit.hardware import catalog
from nbtoolkit.inputs.chat_formats import NAMED_TEMPLATES, ChatFormat, template_syntax_error
from nbtoolkit.spec_parts.adapters import ALL_LINEAR
from nbtoolkit.spec_parts.block import SpecBlock
from nbtoolkit.spec_parts.reward_names import BUNDLED_REWARDS, defined_names, reference_problem
from nbtoolkit.tasks import TASK_NAMES

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


def _offload(value: Any) -> Any:
    """`true`/`false` mean cpu/none."""
    if isinstance(value, bool):
        return "cpu" if value else "none"
    return value


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

    model_config = ConfigDict(title="Preference tuning")  # the form's section (a field with a title is in it)

    method: Literal["dpo", "orpo", "simpo", "kto"] = Field(
        "dpo", title="Method", description="the TRL trainer: DPO, ORPO, CPO-SimPO or KTO"
    )
    beta: float = Field(
        0.1, gt=0, title="Beta", description="how far from the reference (dpo, kto) or the odds-ratio weight"
    )
    loss_type: str | None = Field(
        None, title="Loss type", description="dpo: sigmoid (default), ipo, hinge, ...; kto: kto, ..."
    )

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
    """GRPO: reward functions and reward models scoring sampled completions, and how many completions to sample."""

    model_config = ConfigDict(title="GRPO rewards and sampling")  # the form's section (a field with a title is in it)

    functions: list[str | ShippedFunction] = Field(
        default_factory=list,
        title="Reward functions",
        description="module:function or path/to/file.py:function (in the form: one per line); default (with no "
        "models) the bundled arithmetic reward",
    )
    models: list[str] = Field(
        default_factory=list,
        title="Reward models",
        description="reward models scoring each completion: job:ID (a reward-model job's), a hub id or a local "
        "folder (in the form: one per line); beside the functions",
    )
    weights: list[float] | None = Field(
        None,
        title="Reward weights",
        description="one per function, then one per model (in the form: separated by new lines, spaces or "
        "semicolons; decimals with a point, 0.5); default all 1",
    )
    num_generations: int = Field(
        4, ge=2, title="Completions per prompt", description="completions sampled per prompt (the group)"
    )
    max_completion_length: int = Field(
        32, ge=1, le=65536, title="Completion length", description="tokens sampled per completion"
    )
    temperature: float = Field(1.0, gt=0, title="Temperature", description="sampling temperature of the completions")
    beta: float = Field(0.0, ge=0, title="KL weight (beta)", description="KL weight; > 0 keeps a reference model")
    use_vllm: bool = Field(
        False, title="Generate with vLLM", description="generate with vLLM (cuda only); default transformers"
    )

    @field_validator("functions")
    @classmethod
    def _named_functions(cls, functions: list[str | ShippedFunction]) -> list[str | ShippedFunction]:
        for ref in functions:
            # shipped text that is not Python, or defines another name, is refused here rather than in the job
            where = f"reward.functions {getattr(ref, 'name', '')!r}: its source"
            if isinstance(ref, ShippedFunction) and ref.name not in defined_names(ref.source, where):
                raise ValueError(f"{where} defines no function {ref.name!r}")
            problem = reference_problem(ref) if isinstance(ref, str) else None
            if problem:
                raise ValueError(problem)
        return functions

    @field_validator("weights", mode="before")
    @classmethod
    def _no_decimal_comma(cls, weights: Any) -> Any:
        """`0,5` typed in a text box: 0.5 or 0 and 5? Refused rather than guessed."""
        for weight in weights if isinstance(weights, list) else []:
            if isinstance(weight, str) and "," in weight:
                raise ValueError(
                    f"reward.weights {weight!r} has a comma inside a number, which could be a decimal comma or two "
                    "weights; write decimals with a point (0.5) and separate weights by new lines, spaces or semicolons"
                )
        return weights

    @field_validator("models")
    @classmethod
    def _named_models(cls, models: list[str]) -> list[str]:
        for name in models:
            if not name.strip():
                raise ValueError("reward.models has an empty entry; give job:ID, a hub id or a local folder")
        return models

    @property
    def scorers(self) -> int:
        """How many rewards score each completion: the functions (the bundled ones when neither functions nor
        models are named) and the models."""
        functions = len(self.functions) or (0 if self.models else len(BUNDLED_REWARDS))
        return functions + len(self.models)

    @model_validator(mode="after")
    def _one_weight_each(self) -> RewardSpec:
        if self.weights is not None and len(self.weights) != self.scorers:
            which = "" if self.functions or self.models else " (the bundled default rewards)"
            raise ValueError(
                f"reward.weights has {len(self.weights)} value(s) for {self.scorers} reward(s){which}; give one "
                "each, functions first, then models"
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
