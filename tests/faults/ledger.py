"""The fault suite's ledger: one line per injected fault, added up into the closing line of the run.

Observations go to a file named in the environment, so the totals add up across the workers of
`pytest -n` (they inherit the controller's environment); tests/conftest.py opens and closes it.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

LEDGER_ENV = "NBTOOLKIT_FAULT_LEDGER"


@dataclass
class Observation:
    test: str
    fault: str
    status: str
    status_true: bool
    orphans: int
    records_lost: int
    records_duplicated: int


def open_ledger(config) -> None:
    """In the controlling pytest process (tests/conftest.py calls this first thing): a fresh ledger file,
    named in the environment that the workers of `pytest -n` inherit."""
    if not hasattr(config, "workerinput") and LEDGER_ENV not in os.environ:
        handle, path = tempfile.mkstemp(prefix="nbtoolkit-faults-", suffix=".jsonl")
        os.close(handle)
        os.environ[LEDGER_ENV] = path


def close_ledger(terminalreporter, config) -> None:
    """The closing line, in the controlling process, from every observation any worker wrote."""
    path = os.environ.get(LEDGER_ENV)
    if hasattr(config, "workerinput") or not path or not Path(path).exists():
        return
    seen = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
    Path(path).unlink()
    os.environ.pop(LEDGER_ENV)
    if not seen:
        return
    terminalreporter.write_line(
        f"faults injected {len(seen)}, jobs whose final status was wrong {sum(not o['status_true'] for o in seen)}, "
        f"orphan processes {sum(o['orphans'] for o in seen)}, "
        f"metric records lost {sum(o['records_lost'] for o in seen)}, "
        f"duplicated {sum(o['records_duplicated'] for o in seen)}"
    )


def record(observation: Observation) -> None:
    if os.environ.get(LEDGER_ENV):
        with open(os.environ[LEDGER_ENV], "a") as ledger:
            ledger.write(json.dumps(asdict(observation)) + "\n")
