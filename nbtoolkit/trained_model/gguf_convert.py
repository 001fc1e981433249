"""Run in llama.cpp's own environment (.venv-llama, `make llama-env`), never imported by nbtoolkit: a merged model
folder to one GGUF file with llama.cpp's own tools, then the file's metadata read back as one JSON line.

    .venv-llama/bin/python gguf_convert.py MERGED_DIR OUT.gguf QUANT END_TOKEN_ID NAME

1. llama.cpp's converter (convert_hf_to_gguf.py, copied beside the environment from llama-cpp-python's sdist) at
   `--outtype` QUANT, or f16 where its `--outtype` has no such type (q4_k_m), with `--model-name` NAME (else it
   names the model after the scratch folder: "Merged").
2. gguf-py's gguf_new_metadata sets `tokenizer.ggml.eot_token_id` to END_TOKEN_ID: the converter reads only
   bos/eos/unk/sep/pad/cls/mask from tokenizer_config.json (gguf-py/gguf/vocab.py:74), so no input file can name
   the end of turn; llama.cpp guesses it at load from a list of names (src/llama-vocab.cpp:2693), the file states it.
3. q4_k_m: llama.cpp's quantizer (`llama_cpp.llama_model_quantize`, the library llama-quantize calls).

The converter names the tokenizer's pre-tokenizer by hashing what the tokenizer makes of a test text
(conversion/base.py:1629 get_vocab_base_pre) and refuses a hash it does not list: every tokenizer trained apart
(the bundled tiny models' among them) has its own. Where tokenizer.json's pre-tokenizer is exactly GPT-2's
byte-level split, this names it "gpt-2", the pre-tokenizer llama.cpp implements for that split; any other unknown
one is still refused. Its GPT-2 reads the context length from `n_ctx` alone (conversion/gpt2.py:20), which
transformers has not written since GPT2Config took `n_positions`: a GPT-2 saved today (one trained from its config,
as the GPT-2 tutorial's) failed with "'n_ctx'"; the config it reads gets `n_ctx` = `n_positions` where it has none.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

CONVERTER_DIR = Path(sys.prefix) / "llama.cpp"
#: the quants the converter's --outtype writes itself; the rest are quantized from its f16
CONVERTER_TYPES = ("f16", "bf16", "q8_0")
#: tokenizer.json's pre_tokenizer of GPT-2 (and every tokenizer trained with tokenizers' ByteLevel defaults)
GPT2_PRE_TOKENIZER = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}


def main(merged: Path, out: Path, quant: str, end_token_id: int, name: str) -> None:
    sys.path[:0] = [str(CONVERTER_DIR), str(CONVERTER_DIR / "gguf-py")]
    with tempfile.TemporaryDirectory(dir=out.parent) as scratch:
        converted = Path(scratch) / "converted.gguf"
        convert(merged, converted, quant if quant in CONVERTER_TYPES else "f16", name)
        with_end = out if quant in CONVERTER_TYPES else Path(scratch) / "with-end.gguf"
        set_end_of_turn(converted, with_end, end_token_id)
        if with_end != out:
            quantize(with_end, out, quant)
    print(json.dumps(metadata(out)))


def convert(merged: Path, out: Path, outtype: str, name: str) -> None:
    import convert_hf_to_gguf
    from conversion.base import ModelBase, TextModel

    known = TextModel.get_vocab_base_pre
    load_hparams = ModelBase.load_hparams

    def hparams(dir_model: Path, is_mistral_format: bool) -> dict:
        config = load_hparams(dir_model, is_mistral_format)
        if "n_positions" in config:
            config.setdefault("n_ctx", config["n_positions"])
        return config

    def pre_tokenizer(model, tokenizer) -> str:
        try:
            return known(model, tokenizer)
        except NotImplementedError:
            spec = json.loads((merged / "tokenizer.json").read_text()).get("pre_tokenizer")
            if spec == GPT2_PRE_TOKENIZER:
                return "gpt-2"
            raise

    TextModel.get_vocab_base_pre = pre_tokenizer
    ModelBase.load_hparams = staticmethod(hparams)
    sys.argv = ["convert_hf_to_gguf.py", str(merged), "--outfile", str(out), "--outtype", outtype, "--model-name", name]
    convert_hf_to_gguf.main()


def set_end_of_turn(source: Path, out: Path, end_token_id: int) -> None:
    from gguf.scripts import gguf_new_metadata

    sys.argv = ["gguf_new_metadata", str(source), str(out), "--special-token-by-id", "eot", str(end_token_id)]
    gguf_new_metadata.main()


def quantize(source: Path, out: Path, quant: str) -> None:
    import llama_cpp

    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = getattr(llama_cpp, f"LLAMA_FTYPE_MOSTLY_{quant.upper()}")
    params.nthread = os.cpu_count() or 1
    if llama_cpp.llama_model_quantize(str(source).encode(), str(out).encode(), params) != 0:
        raise SystemExit(f"llama.cpp's quantizer could not write {quant} from {source}")


def metadata(path: Path) -> dict:
    """What nbtoolkit checks: the template, the end tokens and the file type, as GGUFReader reads them."""
    from gguf import GGUFReader

    fields = GGUFReader(path).fields

    def value(key: str):
        return fields[key].contents() if key in fields else None

    return {
        "chat_template": value("tokenizer.chat_template"),
        "eos_token_id": value("tokenizer.ggml.eos_token_id"),
        "eot_token_id": value("tokenizer.ggml.eot_token_id"),
        "pre_tokenizer": value("tokenizer.ggml.pre"),
        "file_type": value("general.file_type"),
        "name": value("general.name"),
    }


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], int(sys.argv[4]), sys.argv[5])
