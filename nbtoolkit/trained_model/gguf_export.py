"""A merged model folder to one GGUF file (`nbtoolkit export ID --format gguf`), by llama.cpp's own converter and
quantizer in their own environment (.venv-llama, `make llama-env`): the converter imports sentencepiece, which
nbtoolkit's lock does not hold, and llama.cpp compiles for 12-16 minutes on 2 cores, too long for every set-up.

nbtoolkit runs gguf_convert.py with that environment's python and checks what the file says against the folder:
the trained chat template (`tokenizer.chat_template`) and the end-of-turn token as `tokenizer.ggml.eos_token_id`
and `tokenizer.ggml.eot_token_id`, the tokens a llama.cpp server stops at.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

from nbtoolkit.backends import LaunchError

QUANTS = ("f16", "bf16", "q8_0", "q4_k_m")
DEFAULT_QUANT = "f16"
CONVERT_SCRIPT = Path(__file__).with_name("gguf_convert.py")
#: the class name before a traceback's last line ("NotImplementedError: BPE pre-tokenizer was not recognized")
EXCEPTION_NAME = re.compile(r"^\w+(Error|Exception): ")


def llama_env() -> Path:
    """Where `make llama-env` builds it (beside nbtoolkit's checkout), or NBTOOLKIT_LLAMA_ENV for an installed one."""
    return Path(os.environ.get("NBTOOLKIT_LLAMA_ENV") or Path(__file__).resolve().parents[2] / ".venv-llama")


def llama_python() -> Path:
    """The environment's python, or the sentence that says how to build it."""
    env = llama_env()
    python = env / "bin" / "python"
    if not (python.is_file() and (env / "llama.cpp" / "convert_hf_to_gguf.py").is_file()):
        raise LaunchError(
            f"--format gguf needs llama.cpp's environment at {env}, which is not built; run `make llama-env` in "
            "nbtoolkit's checkout (a one-time build of llama.cpp, 12-16 minutes on 2 cores)"
        )
    return python


def check_quant(quant: str) -> None:
    if quant not in QUANTS:
        raise LaunchError(f"--quant '{quant}' is not a GGUF type nbtoolkit writes; use {', '.join(QUANTS)}")


def write_gguf(merged: Path, out: Path, quant: str, end_token_id: int, name: str) -> Path:
    """The merged folder as `out/model-QUANT.gguf`, its model called `name`, after checking that the file holds the folder's chat template
    and its end token as eos and eot; returns the file."""
    gguf = out / f"model-{quant}.gguf"
    out.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [str(llama_python()), str(CONVERT_SCRIPT), str(merged), str(gguf), quant, str(end_token_id), name],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": ""},  # the environment's own packages, not nbtoolkit's
    )
    if done.returncode != 0:
        reason = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise LaunchError(f"llama.cpp's converter could not write {gguf.name}: {EXCEPTION_NAME.sub('', reason)}")
    try:
        check_metadata(json.loads(done.stdout.strip().splitlines()[-1]), merged, end_token_id, gguf)
    except LaunchError:
        gguf.unlink()
        raise
    return gguf


def check_metadata(found: dict, merged: Path, end_token_id: int, gguf: Path) -> None:
    template_file = merged / "chat_template.jinja"
    template = template_file.read_text() if template_file.is_file() else None
    if found["chat_template"] != template:
        raise LaunchError(f"{gguf} holds another chat template than the trained one; it was deleted")
    if found["eos_token_id"] != end_token_id or found["eot_token_id"] != end_token_id:
        raise LaunchError(
            f"{gguf} ends turns at eos {found['eos_token_id']} / eot {found['eot_token_id']}, not at the trained "
            f"end token {end_token_id}; it was deleted"
        )
