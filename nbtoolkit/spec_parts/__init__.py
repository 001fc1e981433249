"""The spec's parts (nbtoolkit.spec, RunSpec, is their public face): the block base every core and backend block
extends, the core's blocks, the YAML as read, errors, `extra`, local paths, and the facts its rules check (adapters,
trackers, reward function names).
"""
