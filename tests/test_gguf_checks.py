"""What `export --format gguf` refuses without llama.cpp's environment (tests/gguf runs the real conversion):
a file that lost the trained template or its end of turn is deleted, with a sentence that says which."""

from __future__ import annotations

import pytest

from nbtoolkit.backends import LaunchError
from nbtoolkit.trained_model.gguf_export import check_metadata, check_quant

TEMPLATE = "{% for message in messages %}<|im_start|>{{ message['content'] }}<|im_end|>{% endfor %}"


@pytest.fixture
def merged(tmp_path):
    folder = tmp_path / "merged"
    folder.mkdir()
    (folder / "chat_template.jinja").write_text(TEMPLATE)
    return folder


def test_the_trained_template_and_end_token_pass(merged, tmp_path):
    check_metadata({"chat_template": TEMPLATE, "eos_token_id": 2, "eot_token_id": 2}, merged, 2, tmp_path / "m.gguf")


@pytest.mark.parametrize(
    ("found", "sentence"),
    [
        ({"chat_template": None, "eos_token_id": 2, "eot_token_id": 2}, "holds another chat template than the trained"),
        ({"chat_template": TEMPLATE, "eos_token_id": 0, "eot_token_id": 2}, "ends turns at eos 0 / eot 2, not at the"),
        ({"chat_template": TEMPLATE, "eos_token_id": 2, "eot_token_id": None}, "ends turns at eos 2 / eot None, not"),
    ],
)
def test_a_file_without_the_template_or_the_end_of_turn_is_refused(merged, tmp_path, found, sentence):
    with pytest.raises(LaunchError, match=sentence):
        check_metadata(found, merged, 2, tmp_path / "m.gguf")


def test_a_quant_llama_cpp_is_not_asked_for_is_named_with_the_valid_ones():
    with pytest.raises(
        LaunchError, match=r"^--quant 'q2_k' is not a GGUF type nbtoolkit writes; use f16, bf16, q8_0, "
    ):
        check_quant("q2_k")


def test_gguf_is_for_language_models_and_a_file_for_out_is_refused(tmp_path, monkeypatch):
    """Before any work: a classifier's job gets one sentence (no converter traceback, no folder left behind), and
    --out naming a file another."""
    from types import SimpleNamespace

    from nbtoolkit.backends import LaunchError
    from nbtoolkit.spec import load_spec
    from nbtoolkit.trained_model.export import export_model

    monkeypatch.setattr(
        "nbtoolkit.trained_model.export.check_format", lambda fmt, quant=None: None
    )  # no llama env needed
    job = SimpleNamespace(
        id="0a1b2c3d",
        record=SimpleNamespace(status="succeeded"),
        spec=load_spec({"task": "reward-model"}),
        dir=tmp_path,
    )
    with pytest.raises(LaunchError, match=r"^job 0a1b2c3d is a reward-model job; a GGUF holds a language model"):
        export_model(job, "gguf")
    assert not (tmp_path / "export").exists()
    (tmp_path / "afile").write_text("")
    job.spec = load_spec({"task": "chat"})
    with pytest.raises(LaunchError, match=r"afile is a file; give --out a folder"):
        export_model(job, "merged", tmp_path / "afile")
