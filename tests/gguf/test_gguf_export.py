"""`nbtoolkit export ID --format gguf` on a real chat LoRA job of the bundled tiny chat model, checked by llama.cpp
itself (.venv-llama, `make llama-env`): the f16 file keeps the trained template and stops at the end of turn, and
continues a templated prompt as transformers does, token for token; a q4_k_m file is written and loads.

Run apart (`make test-gguf`): llama.cpp's environment takes minutes to build, more than the default set-up has.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from nbtoolkit.api import Job, launch
from nbtoolkit.backends import LaunchError
from nbtoolkit.runner import JobStore
from nbtoolkit.trained_model.gguf_export import llama_env, write_gguf

SIDE = Path(__file__).with_name("llama_side.py")
CONVERSATION = [{"role": "user", "content": "What is 2 + 3?"}]
NEW_TOKENS = 8


@pytest.fixture(scope="module")
def llama_python() -> str:
    python = llama_env() / "bin" / "python"
    if not python.is_file():
        pytest.fail(f"{python} is missing: `make llama-env` builds llama.cpp's environment (`make test-gguf` does)")
    return str(python)


@pytest.fixture(scope="module")
def job(tmp_path_factory) -> Job:
    """A chat LoRA job, 2 steps on 1 rank (~20 s): the export merges its adapter first."""
    home = tmp_path_factory.mktemp("nbhome")
    spec = {"task": "chat", "adapter": {"r": 8}, "train": {"max_steps": 2, "batch_size": 4, "learning_rate": 1.0e-2}}
    started = launch(spec, store=JobStore(home))
    started.wait(timeout=300)
    assert started.record.status == "succeeded", started.logs(tail=40)
    return started


@pytest.fixture(scope="module")
def merged(job, tmp_path_factory) -> Path:
    """The merged folder the GGUF export converts (it makes its own, in a scratch folder): transformers' side."""
    return job.export("merged", tmp_path_factory.mktemp("export") / "merged")


def llama_reads(python: str, gguf: Path, text: str, *question: str) -> dict:
    done = subprocess.run(
        [python, str(SIDE), str(gguf), text, str(NEW_TOKENS), *question], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def greedy(model, prompt: list[int]) -> list[int]:
    """transformers' arg-max continuation, no stop at the end token (llama_side.py's loop, on the other side)."""
    import torch

    ids = torch.tensor([prompt])
    with torch.no_grad():
        for _ in range(NEW_TOKENS):
            ids = torch.cat([ids, model(ids).logits[:, -1:].argmax(-1)], dim=1)
    return ids[0, len(prompt) :].tolist()


def test_the_f16_gguf_keeps_the_template_and_end_of_turn_and_continues_as_transformers_does(
    job, merged, llama_python, tmp_path
):
    from transformers import AutoModelForCausalLM

    from nbtoolkit.train.chat_template import chat_tokenizer

    gguf = job.export("gguf", tmp_path / "f16")
    assert gguf == tmp_path / "f16" / "model-f16.gguf"
    assert [path.name for path in gguf.parent.iterdir()] == [gguf.name]  # the merged folder was scratch
    trained = chat_tokenizer(job.spec)
    text = trained.apply_chat_template(CONVERSATION, add_generation_prompt=True, tokenize=False)
    read = llama_reads(llama_python, gguf, text, CONVERSATION[0]["content"])
    end_of_turn = trained.convert_tokens_to_ids("<|im_end|>")
    assert read["metadata"]["tokenizer.chat_template"] == trained.chat_template
    assert read["metadata"]["tokenizer.ggml.eos_token_id"] == end_of_turn
    assert read["metadata"]["tokenizer.ggml.eot_token_id"] == end_of_turn
    assert read["metadata"]["general.file_type"] == 1  # LLAMA_FTYPE_MOSTLY_F16
    assert read["metadata"]["general.name"] == job.record.name  # not the scratch folder's ("Merged")
    prompt = trained(text, add_special_tokens=False)["input_ids"]
    assert read["prompt"] == prompt  # llama.cpp's pre-tokenizer ("gpt-2") splits as the trained tokenizer does
    model = AutoModelForCausalLM.from_pretrained(merged, dtype="float32")
    continuation = greedy(model.eval(), prompt)
    assert read["continuation"] == continuation
    # served by llama-cpp-python's chat completion with the file's own template: the same answer, ended at the turn
    assert end_of_turn in continuation, "the tiny model's answer should end within the tokens compared"
    answer = trained.decode(continuation[: continuation.index(end_of_turn)])
    assert read["chat"] == {"message": {"role": "assistant", "content": answer}, "finish_reason": "stop"}


def test_a_q4_k_m_gguf_is_written_by_llamas_quantizer_and_loads(job, llama_python, tmp_path):
    gguf = job.export("gguf", tmp_path / "q4", quant="q4_k_m")
    read = llama_reads(llama_python, gguf, "<|im_start|>user\nhi<|im_end|>\n")
    assert read["metadata"]["general.file_type"] == 15  # LLAMA_FTYPE_MOSTLY_Q4_K_M
    assert read["metadata"]["tokenizer.ggml.eot_token_id"] == read["metadata"]["tokenizer.ggml.eos_token_id"]
    assert len(read["continuation"]) == NEW_TOKENS
    with pytest.raises(LaunchError, match=r"model-q4_k_m.gguf exists; give --out another folder"):
        job.export("gguf", tmp_path / "q4", quant="q4_k_m")
    assert job.export("gguf", quant="q8_0").parent == job.export("gguf", quant="q4_k_m").parent  # quants side by side
    assert job.export("gguf", quant="q4_k_m").name == "model-q4_k_m.gguf"  # the job's own, made before: returned


def test_an_unlisted_pre_tokenizer_other_than_gpt2s_byte_level_split_is_still_refused(merged, llama_python, tmp_path):
    """The converter's hash check names pre-tokenizers; only GPT-2's byte-level split is named without it."""
    changed = tmp_path / "whitespace"
    shutil.copytree(merged, changed)
    tokenizer = json.loads((changed / "tokenizer.json").read_text())
    (changed / "tokenizer.json").write_text(json.dumps({**tokenizer, "pre_tokenizer": {"type": "Whitespace"}}))
    with pytest.raises(
        LaunchError, match=r"^llama.cpp's converter could not write model-f16.gguf: BPE pre-tokenizer was"
    ):
        write_gguf(changed, tmp_path / "out", "f16", 2, "whitespace")


def test_a_gpt2_trained_from_its_config_converts_and_continues_as_transformers_does(llama_python, tmp_path):
    """transformers writes no `n_ctx` for a GPT-2 (its config has `n_positions`), which llama.cpp's GPT-2 converter
    reads: the GPT-2 tutorial's model, trained from its config, failed to convert."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    spec = {"task": "causal-lm", "train": {"max_steps": 2}}
    gpt2 = launch(spec, store=JobStore(tmp_path / "nbhome"))
    assert gpt2.wait(timeout=300) == "succeeded", gpt2.logs(tail=40)
    config = json.loads((gpt2.dir / "output" / "model" / "config.json").read_text())
    assert config["model_type"] == "gpt2" and "n_ctx" not in config
    gguf = gpt2.export("gguf", tmp_path / "gguf")
    text = "The quick brown fox"
    read = llama_reads(llama_python, gguf, text)
    model_dir = gpt2.dir / "output" / "model"
    prompt = AutoTokenizer.from_pretrained(model_dir)(text, add_special_tokens=False)["input_ids"]
    assert read["prompt"] == prompt
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype="float32")
    assert read["continuation"] == greedy(model.eval(), prompt)
