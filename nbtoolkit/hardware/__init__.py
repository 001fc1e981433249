"""Facts about the machines a run goes to, as data with their sources: accelerators and instance types (catalog.yaml),
which PyTorch builds have kernels for which GPU (gpu_builds.yaml), the dtype weights load in.
"""
