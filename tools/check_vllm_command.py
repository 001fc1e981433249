"""Check the `vllm serve` commands nbtoolkit renders against vLLM's own argument parser, not our idea of it.

usage: python tools/check_vllm_command.py JOB_ID [JOB_ID ...]   (jobs of NBTOOLKIT_HOME's store)

vLLM must import in this interpreter. vLLM 0.33.0 wants a CUDA torch 2.14; its parser needs none of that, so on a
CPU machine this works with the wheel's Python sources on PYTHONPATH (its compiled extension left out), the pure
packages its parser imports beside them (cbor2, msgspec, openai-harmony, pybase64, uvloop, partial-json-parser,
xgrammar, apache-tvm-ffi, llguidance) and VLLM_TARGET_DEVICE=cpu (docs/serve.md says how). Each command is parsed
by `make_arg_parser` (vllm/entrypoints/common/cli_args.py:431), checked by `validate_parsed_serve_args` (:531), its
parsed values compared with what was meant, and its engine and LoRA settings built by vLLM's own classes.
"""

from __future__ import annotations

import sys
from itertools import pairwise
from pathlib import Path


def check(job_id: str) -> str:
    from vllm.config.lora import LoRAConfig
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.entrypoints.common.cli_args import make_arg_parser, validate_parsed_serve_args
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    from nbtoolkit.api import Job
    from nbtoolkit.trained_model.serve import served_folder
    from nbtoolkit.trained_model.vllm_serve import vllm_serve_argv

    job = Job(job_id)
    argv = vllm_serve_argv(Path(job.model()), served_folder(job), job.name, "127.0.0.1", 8000)
    assert argv[:2] == ["vllm", "serve"], argv
    args = make_arg_parser(FlexibleArgumentParser(prog="vllm serve")).parse_args(argv[2:])  # exits on a bad flag
    validate_parsed_serve_args(args)
    meant = {  # each flag that takes a value, with the value rendered
        flag: value for flag, value in pairwise(argv) if flag.startswith("--") and value[:2] != "--"
    }
    assert args.model_tag == argv[2], (args.model_tag, argv[2])
    assert args.tokenizer == meant["--tokenizer"] and args.generation_config == meant["--generation-config"]
    assert args.chat_template == meant.get("--chat-template"), args.chat_template
    engine = AsyncEngineArgs.from_cli_args(args)
    if args.enable_lora:
        (module,) = args.lora_modules
        assert f"{module.name}={module.path}" == meant["--lora-modules"], module
        LoRAConfig(max_lora_rank=engine.max_lora_rank, max_loras=engine.max_loras)  # vLLM's own validation
        return f"{job_id}: adapter {module.path} on {args.model_tag}, --max-lora-rank {engine.max_lora_rank}: ok"
    return f"{job_id}: merged {args.model_tag}: ok"


def main(job_ids: list[str]) -> int:
    import vllm

    print(f"vLLM {vllm.__version__} from {Path(vllm.__file__).parent}")
    for job_id in job_ids:
        print(check(job_id))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
