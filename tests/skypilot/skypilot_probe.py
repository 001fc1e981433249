"""What the real SkyPilot (0.14.1, in .venv-skypilot) says of the calls and task YAML nbtoolkit's backend hands it.

Run by .venv-skypilot's interpreter (nbtoolkit cannot share its environment: SkyPilot pins click<8.2), with a
request as JSON on stdin; tests/skypilot/test_skypilot_contract.py builds the request and reads the answer. The
helpers `resolve` and `parameters` are the test's too, applied there to the stand-in (tests/skypilot/fake_sky).
"""

from __future__ import annotations

import importlib
import inspect
import json
import sys
from typing import Any


def resolve(dotted: str) -> Any:
    """`sky.jobs.launch` -> the object: the longest importable module of the name, then attributes."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for name in parts[cut:]:
            found = getattr(found, name)
        return found
    raise ModuleNotFoundError(dotted)


def literal(value: Any) -> Any:
    """A default as JSON when it is a plain literal; a sentinel object (SkyPilot's AUTO_JOB_GROUP) as its kind."""
    return value if value is None or isinstance(value, bool | int | float | str) else f"<{type(value).__name__}>"


def parameters(function: Any) -> list[list[Any]]:
    """[name, kind, has a default, the default] of each parameter: what decides which calls bind."""
    return [
        [name, parameter.kind.name, has_default, literal(parameter.default) if has_default else None]
        for name, parameter in inspect.signature(function).parameters.items()
        for has_default in [parameter.default is not parameter.empty]
    ]


def bind_error(function: Any, positional: int, keywords: list[str]) -> str | None:
    """Why a call with this many positional arguments and these keywords would raise TypeError; None if it binds."""
    try:
        inspect.signature(function).bind(*[None] * positional, **dict.fromkeys(keywords))
    except TypeError as error:
        return str(error)
    return None


def task_error(config: dict[str, Any], attributes: list[str]) -> str | None:
    """Why SkyPilot's loader refuses the task (its schema, sky/utils/schemas.py get_task_schema, then the Task and
    its Resources), or which attribute the backend reads it lacks; None if it loads."""
    import sky

    try:
        task = sky.Task.from_yaml_config(config)
    except Exception as error:  # SkyPilot's own refusal, whatever its class
        return f"{type(error).__name__}: {error}"
    missing = [name for name in attributes if not hasattr(task, name)]
    return f"sky.Task has no {', '.join(missing)}" if missing else None


def main() -> None:
    request = json.load(sys.stdin)
    import sky
    from sky.exceptions import JobExitCode

    answer = {
        "version": sky.__version__,
        "bind_errors": {
            call["where"]: bind_error(resolve(call["name"]), call["positional"], call["keywords"])
            for call in request["calls"]
        },
        "parameters": {name: parameters(resolve(name)) for name in sorted({call["name"] for call in request["calls"]})},
        "task_errors": {
            variant: task_error(config, request["task_attributes"]) for variant, config in request["tasks"].items()
        },
        "job_exit_codes": {code.name: int(code) for code in JobExitCode},
    }
    print(json.dumps(answer))


if __name__ == "__main__":
    main()
