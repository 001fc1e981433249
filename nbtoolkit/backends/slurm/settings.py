"""The spec's `slurm:` block: where and how long the batch job runs (light: the spec gathers it at import)."""

from __future__ import annotations

import re

from pydantic import ConfigDict, Field, field_validator

from nbtoolkit.spec_parts.block import SpecBlock

#: a partition or account name as it goes on an `#SBATCH` line: nothing a shell or Slurm's parser reads specially
SLURM_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
#: Slurm's --time forms: minutes, minutes:seconds, hours:minutes:seconds, days-hours[:minutes[:seconds]]
TIME_LIMIT = re.compile(r"\d+|\d+:\d\d|\d+:\d\d:\d\d|\d+-\d+(:\d\d){0,2}")


class SlurmSpec(SpecBlock):
    """Where and how long the batch job runs on a Slurm cluster; omitted fields take the cluster's defaults."""

    model_config = ConfigDict(title="Slurm")

    partition: str | None = Field(
        None, title="Partition", description="Slurm partition (sbatch --partition); default: the cluster's"
    )
    time_limit: int | str | None = Field(
        None,
        title="Time limit",
        description="minutes, or HH:MM:SS / D-HH:MM:SS (sbatch --time); default: the partition's",
    )
    account: str | None = Field(None, title="Account", description="account to charge (sbatch --account)")
    requeue: bool = Field(
        True,
        title="Requeue on preemption",
        description="requeue after preemption or node failure, resuming from the last checkpoint",
    )

    @field_validator("partition", "account")
    @classmethod
    def _plain_name(cls, value: str | None, info) -> str | None:
        if value is not None and not SLURM_NAME.fullmatch(value):
            raise ValueError(
                f"slurm.{info.field_name} {value!r} may hold only letters, digits, '.', '_' and '-' "
                f"and start with a letter or digit, e.g. {'gpu' if info.field_name == 'partition' else 'my-lab'}"
            )
        return value

    @field_validator("time_limit")
    @classmethod
    def _slurm_time(cls, value: int | str | None) -> int | str | None:
        if value is None:
            return None
        if (isinstance(value, int) and value < 1) or (
            isinstance(value, str)
            and (not TIME_LIMIT.fullmatch(value) or not any(digit in "123456789" for digit in value))
        ):
            raise ValueError(
                f"slurm.time_limit {value!r} is not a Slurm time limit; give minutes (e.g. 90) "
                "or HH:MM:SS (e.g. 12:00:00) or D-HH:MM:SS (e.g. 2-00:00:00)"
            )
        return value
