"""The `slurm` backend (`hardware.target: slurm`): a Slurm batch job whose nodes run the same launch as here.

`settings` holds the spec's `slurm:` block, `render` checks a Slurm spec and renders it (pure),
`sbatch` writes the job script and each node's launch, and `follow` is the detached program that
submits the job, streams its output, follows its state and cancels it on stop. The catalog's cloud
prices are not a cluster's: a Slurm run costs what hardware.hourly_price_usd says, else unknown.
"""

from nbtoolkit.backends import Backend
from nbtoolkit.backends.slurm.settings import SlurmSpec

backend = Backend(
    name="slurm", implementation=f"{__name__}.render", target="slurm", block=SlurmSpec, priced_by_catalog=False
)
