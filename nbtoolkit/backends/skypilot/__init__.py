"""The `skypilot` backend: a SkyPilot managed job on whichever cloud SkyPilot finds capacity in.

`settings` holds the spec's `skypilot:` block, `render` checks a SkyPilot spec and renders it (pure),
`task` writes the task YAML and the folder every node runs in, and `follow` is the program a job's
supervisor runs: it launches the managed job with SkyPilot's Python API, streams its log, and
cancels it on a stop. Importing this package imports nothing of SkyPilot.
"""

from nbtoolkit.backends import Backend
from nbtoolkit.backends.skypilot.settings import SkyPilotSpec

backend = Backend(name="skypilot", implementation=f"{__name__}.render", target="skypilot", block=SkyPilotSpec)
