"""The dtype a run's weights load in: one rule for the training program and the planner.

transformers 5 loads a checkpoint in its own dtype unless told (`dtype="auto"`), and most modern
checkpoints are bf16: without an explicit dtype `precision: fp32` trained bf16 weights and `bf16`
had no fp32 master copy, while the planner counted fp32. So the program always names the dtype,
and the planner counts the bytes of that same dtype.

- A full fine-tune loads fp32 whatever the precision: fp32 trains fp32, bf16 and fp16 are mixed
  precision (autocast) over fp32 master weights (DeepSpeed keeps its own fp32 copy from them).
- LoRA freezes the base, so it needs no master copy: on a GPU or Trainium it loads in the run's
  16-bit dtype (bf16 or fp16), on a CPU and with `precision: fp32` in fp32. The adapters train in
  fp32 either way (PEFT casts them).
- QLoRA loads NF4 linear layers and bf16 for the rest (the QLoRA paper's); PEFT's
  `prepare_model_for_kbit_training` then casts the rest (embeddings, output layer, norms) to fp32.
"""

from __future__ import annotations

from typing import Literal

LoadDtype = Literal["float32", "bfloat16", "float16", "nf4"]

#: bytes of one parameter of each dtype a base can load in (NF4 is counted by the planner's own constant)
DTYPE_BYTES: dict[str, int] = {"float32": 4, "bfloat16": 2, "float16": 2}

_HALF: dict[str, LoadDtype] = {"bf16": "bfloat16", "fp16": "float16"}

#: the names a saved model's dtype goes by (`merge --dtype`): the spec's precision names and torch's own
SAVE_DTYPES: dict[str, str] = {"fp32": "float32", **_HALF} | {name: name for name in DTYPE_BYTES}


def save_dtype(name: str) -> str:
    """torch's name for a dtype to save in, given by either name; a name of neither, refused in one sentence."""
    if name not in SAVE_DTYPES:
        raise ValueError(f"dtype {name!r} is not one of {', '.join(SAVE_DTYPES)}")
    return SAVE_DTYPES[name]


def load_dtype(precision: str, accelerator: str, adapter: str = "none") -> LoadDtype:
    """The dtype the model's weights load in, for a precision, an accelerator kind and an adapter type."""
    if adapter == "qlora":
        return "nf4"
    if adapter == "lora" and accelerator != "cpu" and precision in _HALF:
        return _HALF[precision]
    return "float32"


def spec_load_dtype(spec) -> LoadDtype:
    """`load_dtype` of a RunSpec."""
    return load_dtype(spec.precision, spec.hardware.accelerator, spec.adapter.type if spec.adapter else "none")
