"""The `vllm serve` command for a job's model on a GPU machine: `nbtoolkit serve ID --print-vllm` shows it.

A full model serves from the job's merged export; an adapter serves on its base with `--enable-lora`, its rank
rounded up to one `--max-lora-rank` accepts. Either way the tokenizer, the chat template and the end tokens come
from the merged export, where `nbtoolkit export` writes the trained ones: vLLM adds generation_config.json's
`eos_token_id` to its stop tokens (vllm/sampling_params.py:790, vLLM 0.33.0). Every flag below is checked against
vLLM's own argument parser by tools/check_vllm_command.py; the facts, from vLLM 0.33.0's wheel:

| flag | where vLLM defines it |
|---|---|
| `vllm serve [model_tag]` | vllm/entrypoints/cli/serve.py:169 |
| `--host`, `--port` | vllm/entrypoints/common/cli_args.py:293, 295 (FrontendArgs) |
| `--chat-template`, `--lora-modules name=path` | vllm/entrypoints/common/cli_args.py:86, 81, 55 |
| `--tokenizer`, `--served-model-name`, `--generation-config` | vllm/engine/arg_utils.py:972, 1031, 1041 |
| `--enable-lora`, `--max-lora-rank` | vllm/engine/arg_utils.py:1610, 1615 |
| `--max-lora-rank` choices | vllm/config/lora.py:27 (`MaxLoRARanks`) |
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from nbtoolkit.backends import LaunchError
from nbtoolkit.trained_model.export import GENERATION_CONFIG, TEMPLATE_FILE
from nbtoolkit.trained_model.saved_folders import ADAPTER_CONFIG, base_weights, is_adapter_folder
from nbtoolkit.trained_model.serve import served_folder

#: the values `--max-lora-rank` accepts (vllm/config/lora.py:27, vLLM 0.33.0)
MAX_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)


def vllm_serve_argv(model: Path, served: Path, name: str, host: str, port: int) -> list[str]:
    """`vllm serve` of a job's final model folder (`model`: a full model or an adapter), its tokenizer, template and
    end tokens from the merged export `served`; requests name the model `name`."""
    template = ["--tokenizer", str(served)]
    if (served / TEMPLATE_FILE).is_file():  # a chat run's (a causal-lm run trains none)
        template += ["--chat-template", str(served / TEMPLATE_FILE)]
    ends = ["--generation-config", str(served)] if (served / GENERATION_CONFIG).is_file() else []
    where = ["--host", host, "--port", str(port)]
    if not is_adapter_folder(model):
        return ["vllm", "serve", str(served), "--served-model-name", name, *template, *ends, *where]
    lora = ["--enable-lora", "--lora-modules", f"{name}={model}", "--max-lora-rank", str(max_lora_rank(model))]
    return ["vllm", "serve", base_weights(model), *lora, *template, *ends, *where]


def vllm_command(job, host: str, port: int) -> str:
    """The command to run on a GPU machine where the job's folder is (the merged export is written first)."""
    return shlex.join(vllm_serve_argv(Path(job.model()), served_folder(job), job.name, host, port))


def max_lora_rank(adapter: Path) -> int:
    """The smallest rank vLLM accepts that holds the adapter's largest (its r, or a larger one in rank_pattern)."""
    config = json.loads((adapter / ADAPTER_CONFIG).read_text())
    rank = max([int(config["r"]), *(int(r) for r in (config.get("rank_pattern") or {}).values())])
    fitting = [choice for choice in MAX_LORA_RANKS if choice >= rank]
    if not fitting:
        raise LaunchError(
            f"the adapter's rank {rank} is above {MAX_LORA_RANKS[-1]}, the largest --max-lora-rank vLLM accepts; "
            "serve its merged model (nbtoolkit export ID --format merged) instead"
        )
    return fitting[0]
