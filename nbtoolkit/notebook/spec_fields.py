"""The spec's fields by dotted name (`train.batch_size`): their type, default and choices.

The form and the `%finetune` flags both edit a plain nested dict through these helpers and
hand it to `load_spec`; neither knows a rule of its own about what a valid spec is.
"""

from __future__ import annotations

import re
import typing
from collections.abc import Callable
from typing import Any

from annotated_types import Ge, Le
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from nbtoolkit import backends
from nbtoolkit.spec import RunSpec

#: a field of a `dict[str, str]` block such as `dataset.files.train`
_DICT_ENTRY = FieldInfo(annotation=typing.Optional[str], default=None)  # noqa: UP045 (a runtime type)


def field_info(path: str) -> FieldInfo:
    """The pydantic field a dotted path names; entries of dict fields are optional strings."""
    model: type[BaseModel] | None = RunSpec
    info: FieldInfo | None = None
    for part in path.split("."):
        if model is None:
            if _is_dict(info):
                return _DICT_ENTRY
            raise KeyError(path)
        info = model.model_fields[part]
        model = _model_of(info.annotation)
    assert info is not None
    return info


def block_model(name: str) -> type[BaseModel] | None:
    """The model of the spec's block `name` (`reward` -> RewardSpec); None: not a block."""
    return _model_of(RunSpec.model_fields[name].annotation)


def _model_of(annotation: Any) -> type[BaseModel] | None:
    for arg in (annotation, *typing.get_args(annotation)):
        if isinstance(arg, type) and issubclass(arg, BaseModel):
            return arg
    return None


def _is_dict(info: FieldInfo | None) -> bool:
    return info is not None and any(
        typing.get_origin(arg) is dict or arg is dict for arg in (info.annotation, *typing.get_args(info.annotation))
    )


def value_type(path: str) -> Any:
    """The field's type without `None`: a Literal, bool, int, float or str."""
    annotation = field_info(path).annotation
    args = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
    if typing.get_origin(annotation) is typing.Union or type(annotation).__name__ == "UnionType":
        return args[0] if len(args) == 1 else str
    return annotation


def free_list(path: str) -> bool:
    """A list of free entries (reward.functions, reward.weights), not of a Literal's values: the form takes them as
    text (split as list_entries says)."""
    kind = value_type(path)
    return typing.get_origin(kind) is list and typing.get_origin(typing.get_args(kind)[0]) is not typing.Literal


#: what separates a list of numbers in the form's text box: new lines, spaces, semicolons, and a comma that is not
#: between two digits (`1, 0.5`); `0,5` stays one entry, which the spec refuses as a decimal comma, never 0 and 5
NUMBER_SEPARATORS = re.compile(r"[\s;]+|(?<!\d),|,(?!\d)")


def list_entries(path: str, text: str) -> list[str]:
    """A free list's text as its entries: a list of numbers split as NUMBER_SEPARATORS says; any other list (reward
    functions and models, where a folder's name may hold a comma or a space) one entry per line."""
    numbers = typing.get_args(value_type(path))[0] in (int, float)
    entries = NUMBER_SEPARATORS.split(text) if numbers else text.splitlines()
    return [entry.strip() for entry in entries if entry.strip()]


def optional(path: str) -> bool:
    annotation = field_info(path).annotation
    return type(None) in typing.get_args(annotation)


#: fields whose values are the registered backends (plugins add to them), not a Literal
REGISTERED: dict[str, Callable[[], list[str]]] = {
    "hardware.target": backends.targets,
    "launcher": lambda: ["auto", *backends.names()],
}


def choices(path: str) -> tuple[Any, ...]:
    """The values a field can take: a Literal's, or a small integer range (ZeRO stage 0-3); else ()."""
    if path in REGISTERED:
        return tuple(REGISTERED[path]())
    kind = value_type(path)
    if typing.get_origin(kind) is typing.Literal:
        return typing.get_args(kind)
    if kind is int:
        low = next((item.ge for item in field_info(path).metadata if isinstance(item, Ge)), None)
        high = next((item.le for item in field_info(path).metadata if isinstance(item, Le)), None)
        if low is not None and high is not None and high - low <= 8:
            return tuple(range(low, high + 1))
    return ()


def default(path: str) -> Any:
    info = field_info(path)
    return None if info.is_required() else info.get_default(call_default_factory=True)


def describe(path: str) -> str:
    return field_info(path).description or ""


# -- a spec as a nested dict ---------------------------------------------------------------------


def get_value(data: dict[str, Any], path: str, missing: Any = None) -> Any:
    node: Any = data
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return missing
        node = node[part]
    return node


def set_value(data: dict[str, Any], path: str, value: Any) -> None:
    *parents, leaf = path.split(".")
    node = data
    for part in parents:
        if not isinstance(node.get(part), dict):
            node[part] = {}
        node = node[part]
    node[leaf] = value


def remove_value(data: dict[str, Any], path: str) -> None:
    """Drop a field, and the blocks it leaves empty."""
    *parents, leaf = path.split(".")
    chain = [data]
    for part in parents:
        node = chain[-1].get(part)
        if not isinstance(node, dict):
            return
        chain.append(node)
    chain[-1].pop(leaf, None)
    for part, node in zip(reversed(parents), reversed(chain[:-1]), strict=False):
        if node.get(part) == {}:
            del node[part]


def named_fields(message: str, paths: typing.Iterable[str]) -> list[str]:
    """The paths a spec error names, in the order the sentence names them (first = the culprit).

    A path is named by its full dotted name or, failing that, by the block it sits in
    (`dataset.files` names `dataset.files.train`), and a list's item by its list (`reward.weights.1` names
    `reward.weights`); ties keep the order of `paths`.
    """
    found = []
    for index, path in enumerate(paths):
        parts = path.split(".")
        for depth in range(len(parts), 1 if len(parts) > 1 else 0, -1):
            name = re.escape(".".join(parts[:depth]))
            match = re.search(rf"(?<![\w.]){name}(?![\w]|\.[^\W\d])", message)
            if match:
                found.append((match.start(), depth < len(parts), index, path))
                break
    return [path for *_, path in sorted(found)]
