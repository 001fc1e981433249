"""GRPO reward functions: the bundled arithmetic ones, shipping a notebook's function as source, loading them in a job.

A function defined in a kernel reaches the job as text in spec.json (`reward.functions: [{name, source}]`),
so every backend carries it without a file of its own: the source of the function, the plain imports and
constants it reads from its module, and the kernel functions it calls, each shipped the same way. What
cannot be rebuilt from text (a closure, a lambda, a live object such as a model) is refused in one sentence.
Light: no torch.
"""

from __future__ import annotations

import ast
import dis
import functools
import importlib
import importlib.util
import inspect
import math
import re
import textwrap
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from nbtoolkit.spec import SpecError
from nbtoolkit.spec_parts.reward_names import NotPython, defined_names
from nbtoolkit.tasks import TASKS

NUMBER = re.compile(r"-?\d+")


class RewardError(SpecError):
    """A reward function that cannot be shipped or loaded; the message is one sentence."""


def reply_text(completion: str | list[dict[str, str]]) -> str:
    """A completion as text: TRL passes conversational completions as a list of messages."""
    return completion if isinstance(completion, str) else " ".join(message["content"] for message in completion)


def correct_answer(completions: list, answer: list[str], **kwargs: Any) -> list[float]:
    """1 when the first number of the reply is the prompt's answer, else 0."""
    found = [NUMBER.search(reply_text(completion)) for completion in completions]
    return [float(match is not None and match.group() == str(want)) for match, want in zip(found, answer, strict=True)]


def number_reply(completions: list, **kwargs: Any) -> list[float]:
    """The share of the reply's characters that are digits: a dense signal toward answering with a number."""
    texts = [reply_text(completion).strip() for completion in completions]
    return [sum(char.isdigit() for char in text) / len(text) if text else 0.0 for text in texts]


# -- shipping a kernel's function ------------------------------------------------------------------


def ship(function: Callable) -> dict[str, str]:
    """`{name, source}` for reward.functions: a module's text that defines `function` again in a job.

    The text is run once here, in a namespace of its own as the job will, so that what it lacks is
    refused now in one sentence rather than as a NameError in the job."""
    source = "\n".join(_definitions(function, seen=set())).rstrip("\n") + "\n"  # ends as a file does: one newline
    shipped = {"name": _name_of(function), "source": source}
    try:
        load(shipped)
    except RewardError as exc:
        raise RewardError(f"reward {shipped['name']} cannot be shipped to the job: {exc}") from None
    return shipped


def ship_file(reference: str, cwd: Path) -> dict[str, str]:
    """`path/to/file.py:function` as `{name, source}`: the whole file travels (checked for the function)."""
    path_text, _, name = reference.rpartition(":")
    path = cwd / Path(path_text).expanduser()
    if not path.is_file():
        raise RewardError(f"reward.functions {reference!r}: {path} does not exist")
    source = path.read_text()
    try:
        defined = defined_names(source, f"reward.functions {reference!r}: {path.name}")
    except NotPython as exc:
        raise RewardError(str(exc)) from None
    if name not in defined:
        raise RewardError(f"reward.functions {reference!r}: {path.name} defines no function {name!r}")
    return {"name": name, "source": source}


def _name_of(function: Callable) -> str:
    if not isinstance(function, types.FunctionType):
        raise RewardError(f"reward {function!r} is not a Python function; define it with def in a cell")
    if function.__name__ == "<lambda>" or "<locals>" in function.__qualname__:
        kind = "a lambda" if function.__name__ == "<lambda>" else f"{function.__qualname__}, defined inside a function,"
        raise RewardError(f"reward {kind} cannot be shipped to the job; define it with def at the top level of a cell")
    if function.__closure__:
        names = ", ".join(function.__code__.co_freevars)
        raise RewardError(
            f"reward {function.__name__} closes over {names} from the kernel, which cannot be shipped to the job; "
            "pass what it needs as constants or read it inside the function"
        )
    return function.__name__


def _definitions(function: Callable, seen: set[str]) -> list[str]:
    """The imports, constants and helper functions `function` reads from its globals, then its own source."""
    name = _name_of(function)
    seen.add(name)
    try:
        source = textwrap.dedent(inspect.getsource(function))
    except (OSError, TypeError):
        raise RewardError(
            f"reward {name} has no source Python can read (e.g. defined with exec); define it with def in a cell"
        ) from None
    lines: list[str] = []
    for used in sorted(_globals_read(function.__code__) | _header_names(source)):
        if used in seen or used not in function.__globals__:
            continue  # a builtin, or already shipped
        seen.add(used)
        lines += _definition_of(used, function.__globals__[used], name, seen)
    imports = [line for line in lines if line.startswith(("import ", "from "))]  # first: constants may use them
    return [*imports, *(line for line in lines if line not in imports), source]


def _header_names(source: str) -> set[str]:
    """The names a `def` reads when it runs, outside its body: decorators, default values, annotations."""
    definition = ast.parse(source).body[0]
    assert isinstance(definition, (ast.FunctionDef, ast.AsyncFunctionDef))
    arguments = definition.args
    header = [
        *definition.decorator_list,
        *arguments.defaults,
        *(d for d in arguments.kw_defaults if d),
        definition.returns,
    ]
    header += [a.annotation for a in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs) if a.annotation]
    header += [a.annotation for a in (arguments.vararg, arguments.kwarg) if a is not None and a.annotation]
    return {node.id for part in header if part is not None for node in ast.walk(part) if isinstance(node, ast.Name)}


def _globals_read(code: types.CodeType) -> set[str]:
    names = {i.argval for i in dis.get_instructions(code) if i.opname in ("LOAD_GLOBAL", "LOAD_NAME")}
    for constant in code.co_consts:
        if isinstance(constant, types.CodeType):
            names |= _globals_read(constant)
    return names


def _definition_of(name: str, value: Any, user: str, seen: set[str]) -> list[str]:
    """One global as the line(s) that make it again: an import, a literal, or a shipped function."""
    if isinstance(value, types.ModuleType):
        return [f"import {value.__name__}" if value.__name__ == name else f"import {value.__name__} as {name}"]
    module = getattr(value, "__module__", None)
    if callable(value) and module not in (None, "__main__") and _importable(module, value):
        return [f"from {module} import {value.__qualname__} as {name}"]
    if isinstance(value, types.FunctionType):
        return _definitions(value, seen)
    try:
        if ast.literal_eval(repr(value)) == value:
            return [f"{name} = {value!r}"]
    except (ValueError, SyntaxError, RecursionError):
        pass
    raise RewardError(
        f"reward {user} reads {name}, a live {type(value).__name__} object of the kernel, which cannot be shipped "
        "to the job; build it inside the function or make it a plain constant"
    )


def _importable(module: str, value: Any) -> bool:
    try:
        found = importlib.import_module(module)
    except ImportError:
        return False
    target: Any = found
    for part in value.__qualname__.split("."):
        target = getattr(target, part, None)
    return target is value


# -- loading in the job ----------------------------------------------------------------------------


def load(reference: str | dict[str, str] | Any) -> Callable:
    """A reward function from `module:function`, `file.py:function` or shipped `{name, source}`."""
    if not isinstance(reference, (str, dict)):  # the spec's ShippedFunction block
        reference = {"name": reference.name, "source": reference.source}
    if isinstance(reference, dict):
        name = reference["name"]
        namespace: dict[str, Any] = {"__name__": f"nbtoolkit_reward_{name}"}
        try:
            exec(compile(reference["source"], f"<reward {name}>", "exec"), namespace)
        except Exception as exc:
            raise RewardError(f"the source of reward {name} fails to run ({type(exc).__name__}: {exc})") from None
        if not callable(namespace.get(name)):
            defined = ", ".join(
                sorted(key for key, value in namespace.items() if isinstance(value, types.FunctionType))
            )
            raise RewardError(
                f"the source of reward {name} defines no function {name} (it defines {defined or 'none'})"
            )
        return namespace[name]
    where, _, name = reference.rpartition(":")
    if where.endswith(".py"):
        spec = importlib.util.spec_from_file_location(Path(where).stem, Path(where).expanduser())
        if spec is None or spec.loader is None or not Path(where).expanduser().is_file():
            raise RewardError(f"reward.functions {reference!r}: {where} does not exist")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    else:
        try:
            module = importlib.import_module(where)
        except ImportError as exc:
            raise RewardError(f"reward.functions {reference!r}: module {where} cannot be imported ({exc})") from None
    function = getattr(module, name, None)
    if not callable(function):
        raise RewardError(f"reward.functions {reference!r}: {where} has no function {name!r}")
    return function


def checked(function: Callable) -> Callable:
    """`function` as GRPO calls it, its return checked: a failure, None, the wrong length or a value that is no
    number stops the job with one sentence naming the function and the row (TRL's own errors name neither);
    a NaN or infinite score is said once (TRL counts it as no score, and the run doctor flags what follows)."""
    if inspect.iscoroutinefunction(function):
        return function  # TRL awaits it on its own loop
    name, warned = function.__name__, []

    @functools.wraps(function)
    def reward(**kwargs: Any) -> Any:
        completions = kwargs.get("completions") or []
        count, done = len(completions), getattr(kwargs.get("trainer_state"), "global_step", None)
        at = f" at step {done + 1}" if done is not None else ""  # the step being made

        def row(index: int) -> str:
            prompts = kwargs.get("prompts") or []
            prompt = f" (prompt {reply_text(prompts[index])[:60]!r})" if index < len(prompts) else ""
            return f"row {index} of {count}{at}{prompt}"

        try:
            values = function(**kwargs)
        except Exception as exc:
            index = _failing_row(function, kwargs, count)
            where = row(index) if index is not None else f"the batch of {count} completions{at}"
            raise RewardError(f"reward {name} raised {type(exc).__name__}: {exc} on {where}") from exc
        one_each = f"it must return a list of {count} numbers, one per completion (None for one it does not score)"
        if values is None or isinstance(values, (str, bytes, dict)) or not hasattr(values, "__len__"):
            raise RewardError(f"reward {name} returned {_shown(values)} for the {count} completions{at}; {one_each}")
        if len(values) != count:
            raise RewardError(f"reward {name} returned {len(values)} values for {count} completions{at}; {one_each}")
        for index, value in enumerate(values):
            number = _number(value)
            if number is False:
                raise RewardError(f"reward {name} returned {_shown(value)} for {row(index)}; {one_each}")
            if number is not None and not math.isfinite(number) and not warned:
                warned.append(index)
                print(
                    f"[nbtoolkit] warning: reward {name} returned {number} for {row(index)}; GRPO counts it as no "
                    "score (said once)",
                    flush=True,
                )
        return values

    return reward


def _number(value: Any) -> float | Literal[False] | None:
    """The score as a float, None for no score, False for a value that is no number."""
    if value is None:
        return None
    if isinstance(value, (str, bytes)):
        return False
    try:
        return float(value)
    except (TypeError, ValueError):
        return False


def _shown(value: Any) -> str:
    return "None" if value is None else f"{str(value)[:40]!r} (a {type(value).__name__})"


def _failing_row(function: Callable, kwargs: dict[str, Any], count: int) -> int | None:
    """The first row the function fails on by itself (its per-completion arguments cut to that row), if any."""
    for index in range(count):
        alone = {
            key: value[index : index + 1] if isinstance(value, list) and len(value) == count else value
            for key, value in kwargs.items()
        }
        try:
            function(**alone)
        except Exception:
            return index
    return None


def with_rewards(spec, functions: list[Callable]):
    """The spec with these kernel functions added to reward.functions, as shipped source (task grpo only)."""
    from nbtoolkit.spec_parts.blocks import RewardSpec

    if TASKS[spec.task].block != "reward":
        owner = next(task.name for task in TASKS.values() if task.block == "reward")
        raise SpecError(f"rewards apply to task {owner} (task is '{spec.task}'); remove them or set task: {owner}")
    shipped = [ship(function) for function in functions]
    reward = spec.reward or RewardSpec()
    kept = [ref for ref in reward.functions if isinstance(ref, str) or ref.name not in {s["name"] for s in shipped}]
    return spec.model_copy(
        update={"reward": RewardSpec.model_validate({**reward.model_dump(), "functions": [*kept, *shipped]})}
    )


def kernel_rewards(data: dict, namespace: dict[str, Any]) -> dict:
    """A `%%finetune` spec whose reward.functions name functions of the kernel (a bare name, no ':'),
    with those shipped as source; other entries stay as they are."""
    reward = data.get("reward") if isinstance(data, dict) else None
    if not isinstance(reward, dict) or not isinstance(reward.get("functions"), list):
        return data
    functions = []
    for ref in reward["functions"]:
        if isinstance(ref, str) and ":" not in ref:
            if not callable(namespace.get(ref)):
                raise SpecError(
                    f"reward.functions {ref!r} is no function of this kernel; define it in a cell first, "
                    "or write module:function or path/to/file.py:function"
                )
            ref = ship(namespace[ref])
        functions.append(ref)
    return {**data, "reward": {**reward, "functions": functions}}
