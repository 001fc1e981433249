"""Stand-in for the optimum package, only as far as `optimum.neuron` (see neuron/__init__.py)."""
