"""plan(spec): fit, largest batch, time and cost, alternatives, and the words shown to people."""

from __future__ import annotations

import math
import warnings
from pathlib import Path

import pytest

from nbtoolkit.api import check_fit
from nbtoolkit.backends import LaunchError
from nbtoolkit.hardware import catalog
from nbtoolkit.planner import fit_problem, plan, report
from nbtoolkit.planner.estimates import FRAGMENTATION, RUNTIME_RESERVE_BYTES, GiB
from nbtoolkit.planner.report import row_spec
from nbtoolkit.spec import load_spec

SEED_003 = row_spec("google/flan-t5-xxl", "p4d.24xlarge", "bf16", "none", batch_size=8)


def test_seed_003_setup_fits_and_costs_what_its_hours_cost():
    result = plan(SEED_003, alternatives=False)
    assert result.confident and result.fits and result.device_fits and result.host_fits
    assert (result.devices_per_node, result.accelerator, result.params) == (8, "A100-40GB", 11_135_332_352)
    part = result.memory
    assert part.weights + part.gradients + part.optimizer == pytest.approx(18 * result.params / 8, rel=1e-6)
    assert part.gathered == 4 * 32128 * 4096
    states = part.weights + part.gradients + part.optimizer + part.gathered
    assert result.per_device_bytes == pytest.approx(
        (states + part.activations) * (1 + FRAGMENTATION) + RUNTIME_RESERVE_BYTES, abs=2
    )
    assert result.steps == math.ceil(3 * math.ceil(287_113 / 64))
    assert result.cost_usd == pytest.approx(result.hours * 32.7726)
    assert result.tokens_per_step == 64 * (512 + 128)
    assert 4 < result.hours < 15  # the seed reports roughly 10 hours


def test_largest_batch_is_the_boundary():
    result = plan(SEED_003, alternatives=False)
    biggest = result.max_batch_size
    at = plan({**SEED_003, "train": {**SEED_003["train"], "batch_size": biggest}}, alternatives=False)
    over = plan({**SEED_003, "train": {**SEED_003["train"], "batch_size": biggest + 1}}, alternatives=False)
    assert at.device_fits and not over.device_fits
    assert over.per_device_bytes > at.device_memory_bytes >= at.per_device_bytes


def test_measured_pace_replaces_the_assumed_one():
    result = plan(SEED_003, measured=23.9, alternatives=False)  # the seed's 287,113 x 3 samples in ~10 h
    assert result.hours == pytest.approx(287_113 * 3 / 23.9 / 3600, rel=0.01)
    assert "measured 23.9 samples/s" in result.throughput_source
    assert 0.05 < result.utilisation < 0.5


def test_memory_does_not_fit_and_offload_needs_host_memory():
    zero2 = plan(
        row_spec("google/flan-t5-xxl", "p3.16xlarge", "fp32", "none")
        | {"parallelism": {"strategy": "deepspeed", "zero_stage": 2}},
        alternatives=False,
    )
    assert zero2.fits is False and zero2.max_batch_size == 0
    offloaded = plan(row_spec("google/flan-t5-xxl", "p3.8xlarge", "fp32", "optimizer + weights"), alternatives=False)
    assert offloaded.device_fits and offloaded.host_fits is False and offloaded.fits is False
    assert offloaded.host_bytes == pytest.approx(20 * offloaded.params * 1.5, rel=1e-6)  # fp32: 4 + 16 bytes
    assert "host memory" in offloaded.wont_fit_message()


def test_alternatives_are_ranked_fitting_and_cheapest_first():
    result = plan(row_spec("google/flan-t5-xxl", "p3.16xlarge", "fp32", "none"))
    assert result.fits is False and result.alternatives
    fitting = [alt for alt in result.alternatives if alt.fits]
    assert fitting and result.alternatives[: len(fitting)] == fitting
    costs = [alt.cost_usd for alt in fitting if not alt.problems]
    assert costs == sorted(costs)
    here = result.best_on_same_hardware()
    assert here.instance_type == "p3.16xlarge" and "parallelism.offload_optimizer cpu" in here.changes
    assert all(alt.changes for alt in result.alternatives)
    assert not any(alt.precision == "bf16" and alt.accelerator.startswith("V100") for alt in fitting)
    lines = result.summary_lines()
    assert any(line.startswith("on this hardware: ") for line in lines)
    assert "does NOT fit" in "\n".join(lines)


def test_sagemaker_instances_and_their_prices():
    spec = {
        "task": "summarization",
        "model": "google/flan-t5-xl",
        "precision": "bf16",
        "hardware": {"target": "sagemaker", "instance_type": "ml.g5.24xlarge"},
        "sagemaker": {"role": "arn:aws:iam::111122223333:role/sm"},
        "dataset": {"max_train_samples": 1000},
        "train": {"epochs": 1, "batch_size": 1},
    }
    result = plan(spec)
    assert result.devices_per_node == 4 and result.hourly_price_usd == catalog.hourly_price("ml.g5.24xlarge")
    assert all(alt.instance_type.startswith("ml.") for alt in result.alternatives)
    spec["hardware"]["hourly_price_usd"] = 5.0
    assert plan(spec, alternatives=False).cost_usd == pytest.approx(plan(spec, alternatives=False).hours * 5.0)


def test_cpu_runs_and_unknown_hardware_are_not_judged():
    local = plan({"task": "text-classification", "train": {"max_steps": 10}}, alternatives=False)
    assert local.fits is None and not local.confident and local.max_batch_size is None
    assert local.wont_fit_message() is None and local.alternatives == []
    assert any("device memory unknown" in line for line in local.summary_lines())
    unknown = plan(
        {
            "task": "summarization",
            "model": "google/flan-t5-xxl",
            "hardware": {"accelerator": "cuda", "instance_type": "p9.mega"},
        }
    )
    assert not unknown.confident and any("is not in the catalog" in problem for problem in unknown.problems)
    assert (
        fit_problem(
            {
                "task": "summarization",
                "model": "someone/unsizeable",
                "hardware": {"accelerator": "cuda", "instance_type": "p3.2xlarge"},
            }
        )
        is None
    )


def test_a_sagemaker_job_longer_than_max_run_is_refused():
    """SageMaker stops a job at max_run: a plan that needs longer is refused before it costs anything."""
    spec = {
        "task": "question-answering",
        "model": "bert-large-uncased",
        "dataset": {"name": "squad"},
        "hardware": {"target": "sagemaker", "instance_type": "ml.p3.2xlarge"},
        "train": {"epochs": 2, "batch_size": 4, "gradient_checkpointing": True},
        "sagemaker": {"role": "arn:aws:iam::111122223333:role/sm", "spot": True, "max_run": 3600, "max_wait": 7200},
    }
    hours = plan(spec, alternatives=False).hours
    assert hours > 1
    problem = fit_problem(spec)
    assert problem.startswith(
        f"the plan's {hours:,.1f} h of training exceed sagemaker.max_run 1.0 h, where "
        "SageMaker stops the job; raise max_run (and max_wait, for spot) to at least "
    )
    assert (
        fit_problem(
            {
                **spec,
                "sagemaker": {
                    **spec["sagemaker"],
                    "max_run": int(hours * 3600) + 60,
                    "max_wait": 2 * int(hours * 3600),
                },
            }
        )
        is None
    )


def test_bf16_on_v100_is_a_problem():
    result = plan(row_spec("google/flan-t5-xl", "p3.16xlarge", "bf16", "none"), alternatives=False)
    assert any("no bfloat16" in problem for problem in result.problems)


def test_launch_check_refuses_or_warns_when_forced():
    spec = plan(SEED_003, alternatives=False)  # fits: no complaint
    assert spec.wont_fit_message() is None
    too_big = row_spec("google/flan-t5-xxl", "g5.24xlarge", "bf16", "none", batch_size=8)
    with pytest.raises(LaunchError, match=r"predicted \d+\.\d GiB per device .* exceeds the 22.5 GiB of one A10G"):
        check_fit(load_spec(too_big))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_fit(load_spec(too_big), force=True)
    assert any("exceeds" in str(warning.message) for warning in caught)
    check_fit(load_spec({"task": "text-classification"}))  # a local CPU run is never checked


def test_plan_json_has_the_promised_keys():
    data = plan(SEED_003, alternatives=False).to_json_dict()
    assert {"fits", "per_device_bytes", "host_bytes", "max_batch_size", "hours", "cost_usd", "formula"} <= set(data)
    assert "18Ψ/N" in data["formula"] and "8·(Ψ_in·s_in + Ψ_tgt·s_tgt)" in data["formula"]
    assert data["per_device_bytes"] / GiB < 40


def test_what_fits_where_doc_is_the_commands_output():
    """docs/what-fits-where.md is exactly what `python -m nbtoolkit.planner.report` writes today."""
    doc = Path(__file__).resolve().parent.parent / "docs" / "what-fits-where.md"
    text = report.document()
    assert text == doc.read_text(), "regenerate: python -m nbtoolkit.planner.report --out docs/what-fits-where.md"
    rows = {tuple(row[:2] + row[3:5]): dict(zip(report.COLUMNS, row, strict=False)) for row in report.table()}
    assert int(rows["flan-t5-xxl", "p4d.24xlarge", "bf16", "none"]["largest batch/GPU"]) >= 8  # the seed ran 8
    assert rows["flan-t5-xxl", "p3.8xlarge", "fp32", "none"]["largest batch/GPU"] == "OOM"
    assert rows["flan-t5-xl", "p3.8xlarge", "bf16", "none"]["largest batch/GPU"] == "no bf16"
    assert len(rows) == 2 * 4 * 2 * 3


def test_a_7b_model_fits_one_24gb_gpu_with_lora_or_qlora_but_not_in_a_full_fine_tune():
    spec = {
        "task": "causal-lm",
        "model": "meta-llama/Llama-2-7b-hf",
        "precision": "bf16",
        "hardware": {"instance_type": "g5.2xlarge", "devices": 1},
        "train": {"batch_size": 1},
    }
    full = plan(spec, alternatives=False)
    qlora = plan({**spec, "adapter": {"type": "qlora"}}, alternatives=False)
    lora = plan({**spec, "adapter": {"type": "lora"}}, alternatives=False)
    assert full.fits is False and lora.fits is True and qlora.fits is True
    # the frozen base has no gradients or AdamW moments; LoRA's base loads in bf16 on a GPU (2 bytes a weight).
    # QLoRA's: the blocks' linear layers in NF4 (4.127 bits), the rest (embeddings, the untied output layer, the
    # norms), which bitsandbytes leaves unquantized, in fp32 once PEFT's prepare_model_for_kbit_training casts it
    assert full.memory.optimizer > 300 * qlora.memory.optimizer
    linear = 32 * (4 * 4096 * 4096 + 3 * 4096 * 11008)  # q, k, v, o and the gated FFN's three, in 32 blocks
    kept = 2 * 32000 * 4096 + (2 * 32 + 1) * 4096  # embeddings and lm_head; two norms a block and a final one
    assert linear + kept == 6_738_415_616  # Llama-2-7B's parameter count
    adapters = 4 * qlora.trainable_params  # fp32
    assert qlora.memory.weights == pytest.approx(linear * 4.127 / 8 + 4 * kept + adapters, rel=1e-6)
    assert lora.memory.weights == pytest.approx(2 * (linear + kept) + adapters, rel=1e-6)
    assert "bfloat16 base" in lora.formula and "NF4" in qlora.formula
    # all-linear at r=8 on Llama-2-7B: 19,988,480 trainable, as PEFT's print_trainable_parameters reports it
    assert "(QLoRA: 19.99M trainable)" in qlora.summary_lines()[0]


@pytest.mark.parametrize(
    "model_type, sizes",
    [
        (
            "llama",
            dict(
                hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2
            ),
        ),
        (
            "llama",
            dict(
                hidden_size=64,
                intermediate_size=128,
                num_hidden_layers=2,
                num_attention_heads=4,
                tie_word_embeddings=True,
            ),
        ),
        ("gpt2", dict(n_embd=64, n_layer=2, n_head=2)),  # Conv1D layers, lm_head tied to the embeddings
        ("t5", dict(d_model=64, d_kv=16, d_ff=128, num_layers=2, num_heads=4, feed_forward_proj="gated-gelu")),
    ],
)
def test_qlora_counts_the_weights_transformers_quantizes_and_the_rest_as_peft_leaves_them(model_type, sizes):
    """bitsandbytes' 4-bit loading replaces the linear layers transformers does not keep (the output layer, tied
    weights: get_keys_to_not_convert); PEFT's prepare_model_for_kbit_training casts every other 16-bit weight to fp32.
    Before, the planner counted the output layer as NF4 and the embeddings as bf16: a 7B QLoRA plan 2.8 GiB short."""
    import torch
    from peft import prepare_model_for_kbit_training
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForSeq2SeqLM
    from transformers.pytorch_utils import Conv1D
    from transformers.quantizers.base import get_keys_to_not_convert
    from transformers.quantizers.quantizers_utils import should_convert_module

    from nbtoolkit.planner.shapes import shape_from_config

    config = AutoConfig.for_model(model_type, vocab_size=500, **sizes)
    auto = AutoModelForSeq2SeqLM if model_type == "t5" else AutoModelForCausalLM
    model = auto.from_config(config, dtype=torch.bfloat16)
    kept = get_keys_to_not_convert(model)
    quantized = sum(
        module.weight.numel()
        for name, module in model.named_modules()
        if (isinstance(module, Conv1D) or type(module) is torch.nn.Linear) and should_convert_module(name, kept)
    )
    assert shape_from_config("tiny", config.to_dict(), "test").quantized_params == quantized
    prepare_model_for_kbit_training(model, use_gradient_checkpointing=False)
    assert {parameter.dtype for parameter in model.parameters()} == {torch.float32}  # none here is 4-bit


@pytest.mark.parametrize("task", ["text-classification", "summarization", "causal-lm"])
def test_planned_lora_parameters_are_what_peft_trains(task):
    """The planner's count of the default (all-linear) against PEFT's own, on the bundled tiny models (the task
    heads left out). The planner counts the blocks only: BERT's pooler (one hidden x hidden layer, which PEFT wraps
    too) is left out."""
    from peft import LoraConfig, get_peft_model

    from nbtoolkit.planner import memory
    from nbtoolkit.planner.shapes import model_shape
    from nbtoolkit.spec_parts.adapters import ALL_LINEAR
    from nbtoolkit.tasks import TASKS
    from nbtoolkit.train.adapters import auto_class
    from nbtoolkit.train.models import model_config

    config = model_config(TASKS[task].bundled_model)
    lora = LoraConfig(r=4, target_modules=ALL_LINEAR, task_type=TASKS[task].peft_task_type)
    model = get_peft_model(auto_class(task).from_config(config), lora)
    trained = {name: p.numel() for name, p in model.named_parameters() if p.requires_grad and "lora_" in name}
    in_blocks = sum(count for name, count in trained.items() if ".pooler." not in name)
    assert memory.lora_params(model_shape(TASKS[task].bundled_model), 4, ALL_LINEAR) == in_blocks
    first_block = {name.split(".lora_")[0] for name in trained if ".0." in name}
    assert len(first_block) >= 4  # attention and feed-forward projections alike


def test_adapters_doc_is_the_commands_output():
    """docs/adapters-what-fits-where.md is exactly what `python -m nbtoolkit.planner.adapter_report` writes."""
    from nbtoolkit.planner import adapter_report

    doc = Path(__file__).resolve().parent.parent / "docs" / "adapters-what-fits-where.md"
    assert adapter_report.document() == doc.read_text(), (
        "regenerate: python -m nbtoolkit.planner.adapter_report --out docs/adapters-what-fits-where.md"
    )


def test_a_launch_predicted_to_cost_more_than_its_budget_is_refused_naming_the_cheapest_that_fits():
    import yaml

    spec = yaml.safe_load((Path(__file__).parents[1] / "notebooks" / "specs" / "bert-qa-sagemaker.yaml").read_text())
    del spec["train"]["max_steps"]  # the tutorial's whole two epochs, not its 100-step demonstration
    predicted = plan(spec)
    assert predicted.cost_usd > 10  # 2 x ml.p3.16xlarge for two SQuAD epochs
    cheapest = next(alt for alt in predicted.alternatives if alt.fits and alt.cost_usd <= 5)
    problem = fit_problem({**spec, "train": {**spec.get("train", {}), "budget_usd": 5}})
    assert problem.startswith(
        f"the plan predicts ${predicted.cost_usd:,.0f} for this run, over its train.budget_usd "
        f"of $5.00; the cheapest setup that fits it is {', '.join(cheapest.changes)} ("
    )
    assert "hardware.instance_type ml.g5" in problem and problem.endswith("or force the launch (--force, force=True)")
    assert len(problem.splitlines()) == 1 and "Plan" not in problem
    with pytest.raises(LaunchError, match="over its train.budget_usd of \\$5.00"):
        check_fit(load_spec({**spec, "train": {**spec.get("train", {}), "budget_usd": 5}}))

    nothing = fit_problem({**spec, "train": {**spec.get("train", {}), "budget_usd": 0.01}})
    assert "over its train.budget_usd of $0.01; no setup the planner knows trains it for that" in nothing
    assert fit_problem({**spec, "train": {**spec.get("train", {}), "budget_usd": predicted.cost_usd + 1}}) is None


def test_a_7b_chat_lora_fits_one_a10g_with_the_chat_defaults_and_a_full_fine_tune_is_offered_it():
    """Qwen2.5-7B-Instruct with LoRA at the chat defaults (bf16 base, all-linear, gradient checkpointing as TRL has
    it) fits one 24 GB A10G at batch 1 and 1,024 tokens, as Axolotl and Unsloth users run it; before, the planner
    counted an fp32 base (28.4 GiB of weights, 40.3 GiB in all). A full fine-tune does not, and is offered LoRA."""
    spec = {
        "task": "chat",
        "model": "Qwen/Qwen2.5-7B-Instruct",
        "precision": "bf16",
        "dataset": {"max_length": 1024},
        "hardware": {"instance_type": "g5.2xlarge", "devices": 1},
        "train": {"batch_size": 1},
    }
    lora = plan({**spec, "adapter": {"type": "lora"}}, alternatives=False)
    assert lora.fits and lora.gradient_checkpointing
    assert 2 <= (lora.memory.weights - 4 * lora.trainable_params) / lora.params < 2.001  # the bf16 base
    full = plan(spec)
    assert full.fits is False
    offered = full.best_on_same_hardware(adapter=True)
    assert offered.changes == ["adapter.type lora"] and offered.fits
    assert offered.per_device_bytes == lora.per_device_bytes
    assert "adapters fit on this hardware: adapter.type lora" in full.wont_fit_message()
    offers = [line.split(" -> ")[0] for line in full.summary_lines() if line.startswith("on this hardware: adapter")]
    assert offers == ["on this hardware: adapter.type lora", "on this hardware: adapter.type qlora"]  # as docs say
