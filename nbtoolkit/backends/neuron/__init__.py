"""The `neuron` backend: Trainium (trn1) through torchrun, one worker per NeuronCore.

Stages, as in the Neuron tutorials: an optional `precompile` (`neuron_parallel_compile` on the
same torchrun command for a few steps; it fills the persistent compile cache and its losses are
meaningless, so they go to precompile/, not the job's metrics), `train`, and an optional
`predict` on CPU (`NEURON_NUM_DEVICES=0`), where generation does not recompile at every new
shape. Commands name `torchrun`, `neuron_parallel_compile` and `python3` as found on PATH in the
Neuron virtualenv, so the exported run.sh runs as-is on a trn1 instance.
"""

from nbtoolkit.backends import Backend
from nbtoolkit.backends.neuron.settings import NeuronSpec

backend = Backend(name="neuron", implementation=f"{__name__}.render", block=NeuronSpec, block_by_default=True)
