"""The `neuron:` block of a spec: Trainium settings, and the worker counts each trn1 instance runs."""

from __future__ import annotations

from pydantic import Field

from nbtoolkit.spec_parts.block import SpecBlock

#: NeuronCores per Trainium instance type, and the worker counts the Neuron tutorials run on each
NEURON_WORKERS: dict[str, tuple[int, ...]] = {
    "trn1.2xlarge": (1, 2),
    "trn1.32xlarge": (1, 2, 8, 32),
    "trn1n.32xlarge": (1, 2, 8, 32),
}


class NeuronSpec(SpecBlock):
    """Trainium (trn1) runs: graph precompilation before training, generation on CPU after it."""

    precompile: bool = Field(True, description="neuron_parallel_compile the same command for a few steps first")
    precompile_steps: int = Field(10, ge=1, description="training steps of the precompile run")
    predict: bool = Field(False, description="evaluate the trained model on CPU afterwards (NEURON_NUM_DEVICES=0)")
    predict_split: str = Field("test", description="the split predict generates for (the tutorial's --do_predict)")
    cache_dir: str = Field("/var/tmp/neuron-compile-cache", description="persistent compile cache (a path or s3://)")
    cc_flags: str | None = Field(None, description="more NEURON_CC_FLAGS, e.g. --model-type=transformer")
