"""The code folder of a SageMaker job that runs nbtoolkit's own program: the package and its distribution's metadata
(nbtoolkit.launching.shipping writes it). The launch scripts nbtoolkit exports import `ship_package` from here."""

from nbtoolkit.launching.shipping import ship_package

__all__ = ["ship_package"]
