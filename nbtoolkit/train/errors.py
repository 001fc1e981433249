"""Errors the training program explains in one sentence instead of a traceback."""


class TrainError(RuntimeError):
    """Data or model problems found at run time (a missing column, a task/model mismatch)."""
