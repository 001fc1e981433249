"""RunSpec: round trips, the house YAML, and one clear sentence per invalid spec."""

from __future__ import annotations

import json
import warnings

import pytest
import yaml

from nbtoolkit.spec import RunSpec, SpecError, SpecWarning, load_spec

FULL = """
name: emotion-bert
task: text-classification
model: bert-base-uncased
dataset: {name: philschmid/emotion, text_column: text, label_column: label}
hardware: {target: local, accelerator: cuda, devices: 2, nodes: 1}
parallelism: {strategy: deepspeed, zero_stage: 3, offload_optimizer: true, offload_params: false}
precision: bf16
compile: none
train: {epochs: 3, max_steps: null, batch_size: 16, grad_accum: 1, learning_rate: 5.0e-5, seed: 42}
extra: {lr_scheduler_type: cosine}
"""


def test_yaml_and_json_round_trip():
    spec = load_spec(FULL)
    assert spec.parallelism.offload_optimizer == "cpu"  # `true` means cpu offload
    assert load_spec(spec.to_yaml()) == spec
    assert load_spec(spec.to_json()) == spec
    assert RunSpec.model_validate(json.loads(spec.to_json())) == spec
    assert yaml.safe_load(spec.to_yaml())["extra"] == {"lr_scheduler_type": "cosine"}


def test_minimal_spec_uses_the_bundled_model():
    spec = load_spec("task: summarization")
    assert spec.model_name == "nbtoolkit/tiny-t5"
    assert spec.to_dict() == {"task": "summarization"}


def test_design_yaml_sagemaker_block_maps_instance_fields_to_hardware():
    spec = load_spec("""
task: question-answering
hardware: {target: sagemaker, accelerator: cuda}
sagemaker: {role: "arn:aws:iam::111122223333:role/sm", region: us-east-1, instance_type: ml.p4d.24xlarge,
            instance_count: 2, spot: true, max_run: 36000, max_wait: 72000}
""")
    assert (spec.hardware.instance_type, spec.hardware.nodes) == ("ml.p4d.24xlarge", 2)
    assert spec.sagemaker.max_wait == 72000


def test_spec_files(tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_text(FULL)
    assert load_spec(path).name == "emotion-bert"
    with pytest.raises(SpecError, match=r"spec file .*missing.yaml does not exist"):
        load_spec(tmp_path / "missing.yaml")


SM = "{role: 'arn:aws:iam::1:role/x'}"
INVALID = [
    (
        "task: translation",
        "task: 'translation' is not valid; expected 'text-classification', 'summarization', 'question-answering', 'causal-lm', 'chat', 'preference', 'grpo', 'reward-model' or 'vision-chat'",
    ),
    ("model: bert-base-uncased", "task is missing; it is required"),
    (
        "task: causal-lm\nepochs: 3",
        (
            "epochs is not a known field (did you mean train.epochs?); valid fields are name, task, model, dataset, hardware, parallelism, precision, "
            "compile, launcher, train, script, resume, extra, adapter, report_to, preference, reward, neuron, sagemaker, skypilot, slurm"
        ),
    ),
    (
        "task: causal-lm\nparallelism: {strategy: deepspeed, zero_stage: 2, offload_params: cpu}",
        "parallelism.offload_params 'cpu' needs ZeRO stage 3 (zero_stage is 2); set zero_stage: 3 or offload_params: none",
    ),
    (
        "task: causal-lm\nparallelism: {strategy: deepspeed, zero_stage: 4}",
        "parallelism.zero_stage: 4 is out of range; it must be <= 3",
    ),
    (
        "task: causal-lm\nparallelism: {strategy: ddp, zero_stage: 2}",
        "parallelism.zero_stage needs strategy 'deepspeed' (strategy is 'ddp'); set strategy: deepspeed or remove it",
    ),
    (
        "task: causal-lm\nparallelism: {strategy: deepspeed, zero_stage: 0, offload_optimizer: true}",
        (
            "parallelism.offload_optimizer 'cpu' needs ZeRO stage 1, 2 or 3 (zero_stage is 0); raise zero_stage or set "
            "offload_optimizer: none"
        ),
    ),
    (
        "task: causal-lm\nparallelism: {strategy: deepspeed, zero_stage: 3, offload_params: nvme}",
        "parallelism.nvme_path is missing; nvme offload needs a directory on a fast local disk",
    ),
    (
        "task: causal-lm\nparallelism: {strategy: xla}",
        "parallelism.strategy 'xla' needs a Neuron accelerator (hardware.accelerator is 'cpu'); set hardware.accelerator: neuron",
    ),
    (
        "task: causal-lm\ncompile: neuron\nhardware: {accelerator: cuda}",
        "compile 'neuron' needs a Neuron accelerator (hardware.accelerator is 'cuda'); set hardware.accelerator: neuron",
    ),
    (
        "task: causal-lm\nhardware: {target: sagemaker, instance_type: ml.g5.xlarge}",
        "sagemaker.role is missing; a SageMaker target needs an IAM role ARN (arn:aws:iam::<account>:role/<name>)",
    ),
    (
        f"task: causal-lm\nhardware: {{target: sagemaker}}\nsagemaker: {SM}",
        "hardware.instance_type is missing; a SageMaker target needs one, e.g. ml.g5.2xlarge",
    ),
    (
        f"task: causal-lm\nhardware: {{target: sagemaker, instance_type: p4d.24xlarge}}\nsagemaker: {SM}",
        (
            "hardware.instance_type 'p4d.24xlarge' is not a SageMaker instance type; SageMaker types start with 'ml.', "
            "e.g. ml.p4d.24xlarge"
        ),
    ),
    (
        "task: causal-lm\nsagemaker: {role: my-role}",
        "sagemaker.role 'my-role' is not an IAM role ARN; expected arn:aws:iam::<account>:role/<name>",
    ),
    (
        "task: causal-lm\nsagemaker: {role: 'arn:aws:iam::1:role/x', spot: true, max_run: 7200, max_wait: 3600}",
        "sagemaker.max_wait 3600 is shorter than max_run 7200; spot jobs need max_wait >= max_run",
    ),
    (
        "task: causal-lm\nprecision: fp16",
        "precision 'fp16' needs a cuda or neuron accelerator; use bf16 or fp32 on cpu",
    ),
    ("task: causal-lm\nprecision: fp8", "precision: 'fp8' is not valid; expected 'fp32', 'bf16' or 'fp16'"),
    (
        "task: causal-lm\nlauncher: local\nhardware: {devices: 2}",
        "launcher 'local' runs one process, but hardware asks for 2; use launcher torchrun or deepspeed, or devices: 1",
    ),
    (
        "task: causal-lm\nparallelism: {strategy: smddp}",
        "parallelism.strategy 'smddp' runs only on SageMaker (hardware.target is 'local'); use ddp or deepspeed locally",
    ),
    ("task: causal-lm\ntrain: {batch_size: 0}", "train.batch_size: 0 is out of range; it must be >= 1"),
    ("task: causal-lm\ntrain: {learning_rate: 3}", "train.learning_rate: 3 is out of range; it must be < 1.0"),
    (
        "task: causal-lm\ntrain: {learning_rate: .nan}",
        "train.learning_rate: nan is not a finite number; give a number (NaN and infinity are not)",
    ),
    (
        "task: causal-lm\ntrain: {learning_rate: 'nan'}",
        "train.learning_rate: 'nan' is not a finite number; give a number (NaN and infinity are not)",
    ),
    (
        "task: causal-lm\ntrain: {epochs: .inf}",  # no bound refused it
        "train.epochs: inf is not a finite number; give a number (NaN and infinity are not)",
    ),
    (
        "task: grpo\nreward: {weights: [1, .nan]}",  # spec.json kept it as null
        "reward.weights.1: nan is not a finite number; give a number (NaN and infinity are not)",
    ),
    (
        "task: causal-lm\nhardware: {nodes: 2, node_rank: 2}",
        "hardware.node_rank 2 is out of range for 2 node(s); use 0 to 1",
    ),
    (
        "task: causal-lm\ndataset: {name: wikitext, files: {train: a.jsonl}}",
        "give either dataset.name (a hub dataset) or dataset.files (local files), not both",
    ),
    (
        "task: causal-lm\ndataset: {files: {training: a.jsonl}}",
        (
            "dataset.files has no 'train' split (it has training); name the training file under that key or set "
            "dataset.train_split"
        ),
    ),
    (
        "task: causal-lm\ndataset: {text_col: body}",
        (
            "dataset.text_col is not a known field; valid fields of dataset are name, config, files, train_split, eval_split, "
            "text_column, text_pair_column, label_column, question_column, context_column, answer_column, summary_column, "
            "prompt_template, max_length, max_target_length, doc_stride, max_train_samples, max_eval_samples, pad_to_max_length, format, chat_template, packing"
        ),
    ),
    ("task: [causal-lm", "the spec is not valid YAML at line 1: expected ',' or ']', but got '<stream end>'"),
    ("- task: causal-lm", "the spec must be a mapping with at least a 'task' key, e.g. task: text-classification"),
    (
        "task: causal-lm\nscript: 5",
        "script: 5 is not valid; expected a mapping with the fields path, args, source_dir, resume_arg",
    ),
    (
        "task: causal-lm\nhardware: gpu",
        (
            "hardware: 'gpu' is not valid; expected a mapping with the fields target, accelerator, devices, nodes, node_rank, "
            "master_addr, master_port, instance_type, hourly_price_usd"
        ),
    ),
]


@pytest.mark.parametrize(("text", "message"), INVALID, ids=[message[:40] for _, message in INVALID])
def test_invalid_specs_get_one_sentence(text, message):
    with pytest.raises(SpecError) as caught:
        load_spec(text)
    assert str(caught.value) == message
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("text", "start"),
    [
        (
            "task: chat\ntrian: {max_steps: 3}",
            "trian is not a known field (did you mean train?); valid fields are name",
        ),
        (
            "task: chat\nTrain: {max_steps: 3}",
            "Train is not a known field (did you mean train?); valid fields are name",
        ),
        (
            "task: chat\ntrain: {learnig_rate: 0.1}",
            "train.learnig_rate is not a known field (did you mean train.learning_rate?); valid fields of train are ",
        ),
        (
            "task: chat\ndataset: {max_lenght: 64}",
            "dataset.max_lenght is not a known field (did you mean dataset.max_length?); valid fields of dataset are ",
        ),
        ("task: chat\nlearning_rate: 0.1", "learning_rate is not a known field (did you mean train.learning_rate?);"),
    ],
)
def test_a_misspelt_field_is_named_with_the_closest_valid_one(text, start):
    with pytest.raises(SpecError) as caught:
        load_spec(text)
    assert str(caught.value).startswith(start) and "\n" not in str(caught.value)


def test_script_short_form_and_yaml_scalars_in_args():
    short = load_spec("task: causal-lm\nscript: run_clm.py\n")
    full = load_spec(
        "task: causal-lm\nscript: {path: run_clm.py, args: [--max_steps, 60, --lr, 5.0e-4, --do_eval, true]}"
    )
    assert short.script.path == full.script.path == "run_clm.py"
    assert full.script.args == ["--max_steps", "60", "--lr", "0.0005", "--do_eval", "true"]


def test_fp16_with_t5_warns_of_overflow():
    with pytest.warns(SpecWarning, match="fp16' with a T5 model often overflows"):
        load_spec("task: summarization\nmodel: google/flan-t5-xl\nprecision: fp16\nhardware: {accelerator: cuda}")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_spec("task: summarization\nmodel: google/flan-t5-xl\nprecision: bf16\nhardware: {accelerator: cuda}")


@pytest.mark.parametrize(
    "changes,sentence",
    [
        ({"train": {"seed": -1}}, "train.seed: -1 is out of range; it must be >= 0"),
        ({"train": {"seed": 2**32}}, "train.seed: 4294967296 is out of range; it must be <= 4294967295"),
        ({"name": "../../etc"}, "name '../../etc' may hold only letters, digits, '.', '_' and '-'"),
        ({"name": "my run"}, "name 'my run' may hold only letters, digits"),
        (
            {"extra": {"output_dir": "/tmp/elsewhere"}},
            "extra.output_dir cannot be set: a job keeps its outputs in its own",
        ),
        # extra used to have the last word over the field (and the plan, which reads the field)
        (
            {"extra": {"gradient_checkpointing": True}},
            (
                "extra.gradient_checkpointing would override train.gradient_checkpointing, which sets it; set "
                "train.gradient_checkpointing instead and remove extra.gradient_checkpointing"
            ),
        ),
        ({"extra": {"bf16": True}}, "extra.bf16 would override precision, which sets it; set precision instead"),
        ({"extra": {"learning_rate": 1e-3}}, "extra.learning_rate would override train.learning_rate"),
        (
            {"extra": {"adam_epsilon": float("nan")}},
            "extra.adam_epsilon: nan holds a number that is not finite (NaN or infinity); give a finite number",
        ),
        ({"extra": {"lr_scheduler_kwargs": {"min_lr": float("-inf")}}}, "extra.lr_scheduler_kwargs: {'min_lr': -inf}"),
        # YAML reads these as text; the program would hand the trainer float('1e999'), an infinity
        ({"extra": {"adam_epsilon": "1e999"}}, "extra.adam_epsilon: '1e999' holds a number that is not finite"),
        ({"extra": {"adam_beta1": "inf"}}, "extra.adam_beta1: 'inf' holds a number that is not finite"),
        (
            {"extra": {"logging_nan_inf_filter": True}},
            "extra.logging_nan_inf_filter is set by nbtoolkit (it stays off so that a NaN loss is logged as NaN",
        ),
        ({"model": "~0"}, "model '~0' starts with ~0, but there is no user '0' here; write the folder's full path"),
        (
            {"dataset": {"files": {"train": "~nobody-here/train.jsonl"}}},
            "dataset.files.train '~nobody-here/train.jsonl' starts with ~nobody-here, but there is no user 'nobody-here'",
        ),
        ({"script": "~nobody-here/train.py"}, "script.path '~nobody-here/train.py' starts with ~nobody-here"),
    ],
)
def test_values_that_would_escape_the_job_or_break_a_run_are_one_sentence(changes, sentence):
    with pytest.raises(SpecError) as refused:
        load_spec({"task": "text-classification", **changes})
    assert str(refused.value).startswith(sentence) and "\n" not in str(refused.value)


def test_safe_names_pass():
    assert load_spec({"task": "text-classification", "name": "bert-emotion_v2.1"}).name == "bert-emotion_v2.1"
