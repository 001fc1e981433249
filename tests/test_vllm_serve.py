"""The `vllm serve` command rendered for a job's model (nbtoolkit.trained_model.vllm_serve): pure, on folders made here; and the
jobs `nbtoolkit serve` refuses to serve, before anything starts.

That vLLM's own parser takes these commands is checked by tools/check_vllm_command.py where vLLM imports
(docs/serve.md); here, what we render: which folder serves, which rank, which template and end tokens.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from nbtoolkit.backends import LaunchError
from nbtoolkit.trained_model.serve import served_folder
from nbtoolkit.trained_model.vllm_serve import vllm_serve_argv


@pytest.fixture
def served(tmp_path):
    """A merged export: a chat template and a generation config beside the weights."""
    folder = tmp_path / "export" / "merged"
    folder.mkdir(parents=True)
    (folder / "chat_template.jinja").write_text("{{ messages }}")
    (folder / "generation_config.json").write_text('{"eos_token_id": [2, 0]}')
    return folder


def adapter(tmp_path, r: int, rank_pattern: dict | None = None):
    folder = tmp_path / "output" / "model"
    (folder / "base").mkdir(parents=True)
    (folder / "base" / "model.safetensors").write_bytes(b"")
    (folder / "adapter_config.json").write_text(json.dumps({"r": r, "rank_pattern": rank_pattern or {}}))
    return folder


def flag(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


def test_a_full_model_serves_its_merged_export_with_the_trained_template_and_end_tokens(tmp_path, served):
    full = tmp_path / "output" / "model"
    full.mkdir(parents=True)
    argv = vllm_serve_argv(full, served, "emotion", "127.0.0.1", 8001)
    assert argv[:3] == ["vllm", "serve", str(served)] and "--enable-lora" not in argv
    assert flag(argv, "--served-model-name") == "emotion" and flag(argv, "--port") == "8001"
    assert flag(argv, "--chat-template") == str(served / "chat_template.jinja")
    assert flag(argv, "--generation-config") == flag(argv, "--tokenizer") == str(served)


@pytest.mark.parametrize(("r", "pattern", "rank"), [(8, None, "8"), (12, None, "16"), (8, {"q_proj": 40}, "64")])
def test_an_adapter_serves_on_its_base_with_the_smallest_lora_rank_vllm_accepts_above_its_own(
    tmp_path, served, r, pattern, rank
):
    model = adapter(tmp_path, r, pattern)
    argv = vllm_serve_argv(model, served, "chat", "0.0.0.0", 8000)
    assert argv[:3] == ["vllm", "serve", str(model / "base")] and "--enable-lora" in argv
    assert flag(argv, "--lora-modules") == f"chat={model}" and flag(argv, "--max-lora-rank") == rank
    assert flag(argv, "--chat-template") == str(served / "chat_template.jinja")


def test_a_run_without_a_template_renders_none_and_a_rank_above_vllms_largest_says_to_serve_merged(tmp_path, served):
    (served / "chat_template.jinja").unlink()
    full = tmp_path / "full"
    full.mkdir()
    assert "--chat-template" not in vllm_serve_argv(full, served, "lm", "127.0.0.1", 8000)
    with pytest.raises(LaunchError, match=r"^the adapter's rank 600 is above 512, the largest --max-lora-rank"):
        vllm_serve_argv(adapter(tmp_path, 600), served, "chat", "127.0.0.1", 8000)


@pytest.mark.parametrize(
    ("task", "info", "said"),
    [
        ("text-classification", {}, r"^job 0a1b2c3d is a text-classification job; serve speaks the chat API"),
        ("serve", {"serves": "3f2a9c1e"}, r"^job 0a1b2c3d is a server itself; serve the job it serves, 3f2a9c1e$"),
    ],
)
def test_serve_refuses_a_model_that_does_not_chat_and_a_server(tmp_path, task, info, said):
    job = SimpleNamespace(
        id="0a1b2c3d", dir=tmp_path, record=SimpleNamespace(task=task, info=info), spec=SimpleNamespace(task=task)
    )
    with pytest.raises(LaunchError, match=said):
        served_folder(job)
    assert not (tmp_path / "export").exists()


def test_serve_without_the_serve_extra_says_how_to_install_it(monkeypatch):
    import importlib.util

    from nbtoolkit.trained_model.serve import check_serving_installed

    found = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None if name == "openai" else found(name))
    with pytest.raises(LaunchError, match=r"^nbtoolkit serve needs openai here; install the serve extra: pip install"):
        check_serving_installed()
