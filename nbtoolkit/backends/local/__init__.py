"""The `local` backend: one python process on this machine."""

from nbtoolkit.backends import Backend

backend = Backend(name="local", implementation=f"{__name__}.render")
