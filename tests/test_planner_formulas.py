"""The planner's formulas against published numbers: the ZeRO paper, DeepSpeed's estimators, Korthikanti et al."""

from __future__ import annotations

import re

import pytest

from nbtoolkit.planner import memory, timing
from nbtoolkit.planner.shapes import model_shape, shape_from_config
from tests.conftest import DATA

GB, GiB = 1e9, 2**30
PSI = 7_500_000_000  # the ZeRO paper's example model
LARGEST = 4096 * 50257  # a 4096-wide model's 50257-word embedding (our choice; the paper gives none)


@pytest.mark.parametrize(("stage", "published_gb"), [(0, 120), (1, 31.4), (2, 16.6), (3, 1.9)])
def test_zero_paper_7_5b_on_64_devices(stage, published_gb):
    """Rajbhandari et al. 2020, Fig. 1: 7.5B parameters, N_d = 64, K = 12."""
    assert memory.zero_paper_bytes(PSI, 64, stage) / GB == pytest.approx(published_gb, abs=0.05)
    states = memory.deepspeed_model_states(
        PSI, LARGEST, trainable=PSI, weight_bytes=2, stage=stage, devices_per_node=8, nodes=8
    )
    assert states.ideal / GB == pytest.approx(published_gb, abs=0.05)  # the plan shows it as the lower bound


def _captured_tables() -> list[dict]:
    """DeepSpeed 0.19.8's printed estimates (tests/data), one dict per estimator call."""
    tables = []
    for block in (DATA / "deepspeed_0.19.8_estimates.txt").read_text().split("Estimated memory needed")[1:]:
        setup = re.search(r"Setup with (\d+) nodes?, (\d+) GPUs? per node", block)
        params = re.search(r"Model with (\d+)M total params(?:, (\d+)M largest layer)?", block)
        rows = re.findall(r"^\s*([\d.]+)GB \|\s*([\d.]+)GB \| (.*)$", block, re.MULTILINE)
        tables.append(
            {
                "nodes": int(setup[1]),
                "per_node": int(setup[2]),
                "params_m": int(params[1]),
                "zero3": params[2] is not None,
                "rows": rows,
            }
        )
    return tables


#: the exact inputs of each captured call (its header shows them rounded to millions)
CAPTURED_INPUTS = [
    (7_500_000_000, 0),
    (7_500_000_000, 4096 * 50257),
    (2_849_757_184, 0),
    (11_135_332_352, 32128 * 4096),
]


def test_deepspeed_estimator_output_for_the_same_inputs():
    tables = _captured_tables()
    assert len(tables) == len(CAPTURED_INPUTS)
    compared = 0
    for table, (params, largest) in zip(tables, CAPTURED_INPUTS, strict=False):
        assert table["params_m"] == int(params / 1e6)
        for cpu_gib, gpu_gib, options in table["rows"]:
            if "zero_init=0" in options:
                continue  # the planner assumes zero.Init for ZeRO-3 (transformers uses it)
            offload_optimizer = "cpu" if "offload_optimizer=OffloadDeviceEnum.cpu" in options else "none"
            offload_params = "cpu" if "offload_param=OffloadDeviceEnum.cpu" in options else "none"
            states = memory.deepspeed_model_states(
                params,
                largest,
                trainable=params,
                weight_bytes=2,
                stage=3 if table["zero3"] else 2,
                devices_per_node=table["per_node"],
                nodes=table["nodes"],
                offload_optimizer=offload_optimizer,
                offload_params=offload_params,
            )
            assert states.device / GiB == pytest.approx(float(gpu_gib), abs=0.006), options
            if table["zero3"] or table["nodes"] == 1 or offload_optimizer == "none":
                assert states.host / GiB == pytest.approx(float(cpu_gib), abs=0.006), options
            else:
                # ZeRO-2 offload across nodes: DeepSpeed counts 4 bytes x every GPU of every node per node;
                # the planner counts the processes of one node (the same number on one node)
                assert states.host / GiB == pytest.approx(float(cpu_gib) / table["nodes"], abs=0.006)
            compared += 1
    assert compared == 10  # 2 ZeRO-2 rows and 3 zero.Init ZeRO-3 rows per setup


def test_deepspeed_estimators_live():
    """Compare with DeepSpeed's own functions over a grid of inputs."""
    from deepspeed.runtime.zero import stage3, stage_1_and_2

    for params, largest in [(PSI, LARGEST), (2_849_757_184, 65_798_144), (125_000_000, 38_597_376)]:
        for per_node, nodes in [(1, 1), (4, 1), (8, 1), (8, 2)]:
            for offload in (True, False):
                cpu, gpu = stage_1_and_2.estimate_zero2_model_states_mem_needs(params, per_node, nodes, offload)
                ours = memory.deepspeed_model_states(
                    params,
                    largest,
                    trainable=params,
                    weight_bytes=2,
                    stage=2,
                    nodes=nodes,
                    devices_per_node=per_node,
                    offload_optimizer="cpu" if offload else "none",
                )
                assert int(ours.device) == pytest.approx(gpu, abs=1)
                if nodes == 1:
                    assert int(ours.host) == pytest.approx(cpu, abs=1)
            for offload, offload_params in [(True, True), (True, False), (False, False)]:
                cpu, gpu, _ = stage3.estimate_zero3_model_states_mem_needs(
                    params, largest, per_node, nodes, cpu_offload=offload, cpu_offload_params=offload_params
                )
                ours = memory.deepspeed_model_states(
                    params,
                    largest,
                    trainable=params,
                    weight_bytes=2,
                    stage=3,
                    devices_per_node=per_node,
                    nodes=nodes,
                    offload_optimizer="cpu" if offload else "none",
                    offload_params="cpu" if offload_params else "none",
                )
                assert (int(ours.device), int(ours.host)) == pytest.approx((gpu, cpu), abs=1)


def _gpt_like(**overrides):
    """A GPT-2-shaped model whose attention keeps its score matrix: Korthikanti et al.'s setting."""
    shape = model_shape("gpt2-medium")
    return shape.model_copy(update={"stores_attention_scores": True, **overrides})


def test_activations_per_layer_match_korthikanti():
    """sbh(34 + 5as/h) bytes per layer at 16 bits, no recomputation (Korthikanti et al. 2022, eq. 1)."""
    shape = _gpt_like()
    s, h, a = 1024, shape.hidden_size, shape.heads
    assert memory.input_layer_bytes(shape, s, 2) == s * h * (34 + 5 * a * s / h)
    no_scores = shape.model_copy(update={"stores_attention_scores": False})  # SDPA/flash: 34sh
    assert memory.input_layer_bytes(no_scores, s, 2) == 34 * s * h


def test_checkpointing_keeps_layer_inputs_and_one_layer():
    shape = _gpt_like()
    s, h, layers = 1024, shape.hidden_size, shape.layers
    full = memory.activation_bytes(shape, input_length=s, target_length=0, activation_bytes=2, checkpointing=False)
    kept = memory.activation_bytes(shape, input_length=s, target_length=0, activation_bytes=2, checkpointing=True)
    layer = memory.input_layer_bytes(shape, s, 2)
    logits = memory.logits_bytes(shape, s, 0, 2)
    assert full == layers * layer + layer + logits
    assert kept == layers * 2 * s * h + 2 * layer + logits  # 2sh per layer input (the paper's full recomputation)


def test_encoder_decoder_activations_count_both_stacks():
    shape = model_shape("google/flan-t5-xl")
    both = memory.activation_bytes(shape, input_length=512, target_length=128, activation_bytes=2, checkpointing=False)
    source_only = memory.activation_bytes(
        shape, input_length=512, target_length=0, activation_bytes=2, checkpointing=False
    )
    assert both > source_only + shape.decoder_layers * memory.target_layer_bytes(shape, 128, 512, 2) * 0.99
    fp32 = memory.activation_bytes(shape, input_length=512, target_length=128, activation_bytes=4, checkpointing=False)
    assert 1.8 < fp32 / both < 2.0  # dropout masks stay 1 byte


def test_flops_are_6_psi_tokens_and_8_with_recomputation():
    """Kaplan et al. 2020: C = 6N per token, N = 12 n_layer d_model² (plus the output layer's d_model x vocab)."""
    gpt2 = model_shape("gpt2")
    h, layers = gpt2.hidden_size, gpt2.layers
    assert timing.flops_per_sample(gpt2, 1024, 0, False) == 6 * 1024 * (12 * layers * h * h + gpt2.vocab_size * h)
    t5 = model_shape("google/flan-t5-xxl")
    six = timing.flops_per_sample(t5, 512, 128, False)
    assert timing.flops_per_sample(t5, 512, 128, True) == six * 8 / 6
    # every weight but the input embedding sees a token: encoder + cross k/v per source, the rest per target
    assert (
        t5.input_matmul_params + t5.target_matmul_params
        == t5.params
        - t5.vocab_size * t5.hidden_size
        - (t5.layers * 2 + t5.decoder_layers * 3 + 2) * t5.hidden_size
        - 2 * 32 * t5.heads
    )


def test_torch_data_parallel_keeps_16_bytes_per_parameter_whole():
    states = memory.torch_model_states(1e9, trainable=1e9, devices_per_node=8)
    assert states.device == 16e9 and states.ideal == 16e9
    assert (
        shape_from_config(
            "x", {"model_type": "gpt2", "n_embd": 64, "n_layer": 2, "n_head": 2, "vocab_size": 100}, "test"
        ).params
        > 0
    )


@pytest.mark.parametrize(
    "fields, batch, source, target",
    [
        (dict(d_model=256, d_kv=64, d_ff=640, num_heads=4, num_layers=2), 2, 128, 32),
        (dict(d_model=384, d_kv=32, d_ff=1536, num_heads=12, num_layers=1), 1, 256, 64),
    ],
)
def test_t5_activations_match_what_autograd_keeps(fields, batch, source, target):
    """The formula against the bytes HF's T5 (eager, bf16, FLAN-T5's gated GELU) keeps for backward,
    counted on CPU by nbtoolkit.planner.calibrate; benchmarks/activation_memory.py shows 18 shapes."""
    import torch
    from transformers import T5Config, T5ForConditionalGeneration

    from nbtoolkit.planner.calibrate import saved_activation_bytes

    torch.manual_seed(0)
    config = T5Config(
        vocab_size=32128,
        feed_forward_proj="gated-gelu",
        dropout_rate=0.1,
        tie_word_embeddings=False,
        decoder_start_token_id=0,
        pad_token_id=0,
        attn_implementation="eager",
        **fields,
    )
    model = T5ForConditionalGeneration(config).to(torch.bfloat16).train()
    measured = saved_activation_bytes(
        model,
        input_ids=torch.randint(0, config.vocab_size, (batch, source)),
        labels=torch.randint(0, config.vocab_size, (batch, target)),
    )
    shape = shape_from_config("t5", config.to_dict(), "test")
    kept = memory.activation_bytes(
        shape, input_length=source, target_length=target, activation_bytes=2, checkpointing=False
    )
    transient = max(memory.input_layer_bytes(shape, source, 2), memory.target_layer_bytes(shape, target, source, 2))
    assert measured / (batch * (kept - transient)) == pytest.approx(1.0, abs=0.1)


def test_nodes_share_their_network_link_once_not_once_per_device():
    """A hierarchical all-reduce sends each node's share over its network link once: 8 GPUs behind one NIC
    take as long between nodes as 1 GPU behind it (a flat per-GPU split of the NIC would make them 8x slower)."""
    from nbtoolkit.planner.timing import Hardware

    def nodes_of(devices_per_node):
        return Hardware(
            peak_flops=1e14,
            devices_per_node=devices_per_node,
            nodes=2,
            device_link_gbs=300,
            network_gbps=25,
            host_link_gbs=16,
        )

    volume = 2 * 4 * 0.34e9  # an fp32 gradient all-reduce of BERT-large
    eight, one = nodes_of(8).collective_seconds(volume), nodes_of(1).collective_seconds(volume)
    assert eight == pytest.approx(one)
    # by hand: half of 2.72 GB crosses a 25 Gbit/s link used at half its datasheet rate (1.5625 GB/s)
    assert one == pytest.approx(1.36e9 / 1.5625e9)
    assert (
        Hardware(
            peak_flops=1e14, devices_per_node=8, nodes=1, device_link_gbs=None, network_gbps=25, host_link_gbs=16
        ).collective_seconds(volume)
        is None
    )


def test_neuron_bf16_keeps_every_state_in_bf16():
    """XLA_USE_BF16=1 casts weights, gradients and AdamW's moments to bf16 (2 bytes each, no fp32 master copy):
    8 bytes a parameter where autocast on a GPU keeps 16."""
    from nbtoolkit.planner import plan

    spec = {
        "task": "summarization",
        "model": "t5-large",
        "dataset": {"max_length": 512},
        "hardware": {"instance_type": "trn1.32xlarge"},
        "train": {"batch_size": 4},
    }
    neuron = plan({**spec, "precision": "bf16"}, alternatives=False).memory
    fp32 = plan({**spec, "precision": "fp32"}, alternatives=False).memory
    assert neuron.weights * 2 == pytest.approx(fp32.weights) and neuron.optimizer * 2 == pytest.approx(fp32.optimizer)
    assert (neuron.weights + neuron.gradients + neuron.optimizer) / 737_668_096 == pytest.approx(8, rel=0.01)
