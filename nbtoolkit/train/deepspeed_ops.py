"""DeepSpeed's compiled ops: which a config needs, and saying in the log when one is compiled now.

DeepSpeed compiles an op on first use (a minute or two each) unless it was prebuilt at install
(`make deepspeed`) or an earlier run left it in the torch extensions cache.
"""

from __future__ import annotations

import json
import os
from pathlib import Path


def builders_needed(config: dict, cpu: bool) -> list[str]:
    """The op builder classes DeepSpeed will load for this config."""
    zero = config.get("zero_optimization", {})
    offloaded = zero.get("offload_optimizer", {}).get("device", "none") != "none"
    needed = ["ShareMemCommBuilder"] if cpu else []  # CPU collectives
    if "optimizer" in config:
        needed.append("CPUAdamBuilder" if offloaded else "FusedAdamBuilder")
    if "nvme" in (zero.get("offload_optimizer", {}).get("device"), zero.get("offload_param", {}).get("device")):
        needed.append("AsyncIOBuilder")
    return needed


def extensions_root() -> Path:
    from torch.utils.cpp_extension import get_default_build_root

    return Path(os.environ.get("TORCH_EXTENSIONS_DIR") or get_default_build_root())


def ops_to_build(config: dict) -> list[str]:
    """Names of the ops this config needs that are neither prebuilt nor in the extensions cache."""
    from deepspeed.accelerator import get_accelerator
    from deepspeed.git_version_info import installed_ops

    accelerator = get_accelerator()
    names = []
    for builder_name in builders_needed(config, cpu=accelerator.device_name() == "cpu"):
        builder = accelerator.create_op_builder(builder_name)
        if builder is None or installed_ops.get(builder.NAME) or not builder.is_compatible():
            continue
        if not any(extensions_root().glob(f"*/{builder.NAME}/{builder.NAME}*.so")):
            names.append(builder.NAME)
    return names


def announce_op_builds(config_path: str | Path) -> None:
    names = ops_to_build(json.loads(Path(config_path).read_text()))
    if names:
        print(
            f"[nbtoolkit] DeepSpeed op(s) {', '.join(names)} not prebuilt: compiling now, once "
            f"(1-2 min each; cached in {extensions_root()}). `make deepspeed` prebuilds them at install.",
            flush=True,
        )
