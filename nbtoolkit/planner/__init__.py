"""Will it fit, how long, how much: plan a RunSpec before anything launches.

Light to import (no torch, transformers or deepspeed): the model's shape comes from a config,
the hardware from `nbtoolkit.hardware.catalog`.
"""

from nbtoolkit.planner.estimates import Estimate, Plan
from nbtoolkit.planner.plan import fit_problem, plan
from nbtoolkit.planner.shapes import ModelShape, ModelShapeError, model_shape

__all__ = ["Estimate", "ModelShape", "ModelShapeError", "Plan", "fit_problem", "model_shape", "plan"]
