"""The `torchrun` backend: one worker per device on each node, c10d rendezvous, rank-prefixed logs.

`torchrun_argv` is the one torchrun command line of nbtoolkit: the DeepSpeed and Neuron backends
run through it too. Rendering picks a free rendezvous port on this machine when the spec gives
none and runs on one node; several nodes need the same port everywhere, so they default to 29500.
"""

from nbtoolkit.backends import Backend

backend = Backend(name="torchrun", implementation=f"{__name__}.render")
