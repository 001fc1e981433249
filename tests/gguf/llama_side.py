"""Run with llama.cpp's environment (.venv-llama/bin/python), not pytest's: what llama.cpp itself makes of a GGUF,
as one JSON line.

    python llama_side.py FILE.gguf TEXT N [QUESTION]

The file's metadata as gguf-py's GGUFReader reads it, llama.cpp's tokens for TEXT (special tokens parsed, no BOS
added: the chat template writes its own), and N tokens of greedy continuation (the arg-max of llama.cpp's logits,
no sampler, no stop), so that the test compares them with transformers' token for token; with QUESTION, the
answer of llama-cpp-python's chat completion (the file's own template, greedy) and why it finished.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(sys.prefix) / "llama.cpp" / "gguf-py"))

import numpy as np
from gguf import GGUFReader
from llama_cpp import Llama

KEYS = (
    "tokenizer.chat_template",
    "tokenizer.ggml.eos_token_id",
    "tokenizer.ggml.eot_token_id",
    "general.file_type",
    "general.name",
)


def main(path: str, text: str, count: int, question: str | None) -> None:
    fields = GGUFReader(path).fields
    metadata = {key: fields[key].contents() if key in fields else None for key in KEYS}
    llm = Llama(model_path=path, n_ctx=256, n_threads=1, logits_all=True, verbose=False)
    prompt = llm.tokenize(text.encode(), add_bos=False, special=True)
    llm.eval(prompt)
    continuation: list[int] = []
    for _ in range(count):
        continuation.append(int(np.argmax(llm.scores[llm.n_tokens - 1])))
        llm.eval(continuation[-1:])
    read = {"metadata": metadata, "prompt": prompt, "continuation": continuation}
    if question is not None:
        llm.reset()
        chat = llm.create_chat_completion([{"role": "user", "content": question}], max_tokens=count, temperature=0)
        read["chat"] = {key: chat["choices"][0][key] for key in ("message", "finish_reason")}
    print(json.dumps(read))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] if len(sys.argv) > 4 else None)
