"""A spec's YAML as nbtoolkit reads it: YAML 1.2's booleans and numbers, `--set FIELD=VALUE` settings, and
changes merged onto a spec section by section.

One reading for every front: a spec file, a `%%finetune` body, `nbtoolkit run --set`, the fork buttons.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from nbtoolkit.spec_parts.errors import SpecError


def merged(base: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    """`base` with `changes` on top, section by section (a nested mapping changes only the keys it names)."""
    result = dict(base)
    for key, value in changes.items():
        both_mappings = isinstance(value, dict) and isinstance(result.get(key), dict)
        result[key] = merged(result[key], value) if both_mappings else value
    return result


class SpecLoader(yaml.SafeLoader):
    """YAML as a spec is read: booleans and numbers per YAML 1.2's core schema, so `args: [--save_strategy, no,
    --seed, 010, --max_time, 1:30]` keeps its words (YAML 1.1 reads no/yes/on/off as booleans, `010` as octal 8,
    `1:30` as base-60 90, `0b101` and `1_000` as numbers). A decimal with a leading zero stays text, as written,
    and a float needs its dot (`1e-5` stays text, as PyYAML always read it); typed fields still take either."""


#: YAML 1.2 core schema's booleans and numbers (PyYAML's constructors read these forms as 1.2 means them)
CORE_SCHEMA = {
    "tag:yaml.org,2002:bool": (r"true|True|TRUE|false|False|FALSE", "tTfF"),
    "tag:yaml.org,2002:int": (r"[-+]?(?:0|[1-9][0-9]*)|0o[0-7]+|0x[0-9a-fA-F]+", "-+0123456789"),
    "tag:yaml.org,2002:float": (
        r"[-+]?(?:\.[0-9]+|[0-9]+\.[0-9]*)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)",
        "-+0123456789.",
    ),
}
SpecLoader.yaml_implicit_resolvers = {
    first: [(tag, pattern) for tag, pattern in resolvers if tag not in CORE_SCHEMA]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
for _tag, (_pattern, _firsts) in CORE_SCHEMA.items():
    SpecLoader.add_implicit_resolver(_tag, re.compile(rf"^(?:{_pattern})$"), list(_firsts))


def read_yaml(text: str) -> Any:
    """A spec's YAML text (a file, a %%finetune body, a --set value) as data, booleans per YAML 1.2."""
    return yaml.load(text, Loader=SpecLoader)


def parse_settings(items: list[str]) -> dict[str, Any]:
    """`--set` items, `["train.learning_rate=1e-4", "max_steps=200"]`, as {field: value}, values read as the
    spec's YAML (numbers, true/false): one reading for the CLI, `%%finetune` and the fork buttons."""
    changes = {}
    for item in items:
        field, sep, value = item.partition("=")
        field = field.strip()
        if not sep or not field or not all(field.split(".")):
            raise SpecError(f"--set {item[:60]!r} is not FIELD=VALUE; e.g. --set train.learning_rate=1e-4")
        try:
            changes[field] = read_yaml(value)
        except yaml.YAMLError:
            raise SpecError(
                f"--set {field}: {value[:40]!r} is not a YAML value; put text that holds YAML's signs in quotes, "
                f"e.g. --set \"{field}='{value[:20]}'\""
            ) from None
    return changes
