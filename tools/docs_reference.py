"""The docs site's reference pages, generated from the code each time the site builds (a MkDocs hook,
named in mkdocs.yml), so they cannot drift from it: reference/spec.md from the RunSpec's pydantic fields
(every block, the backends' included, with each field's description) and reference/cli.md from the
`nbtoolkit` command's own help.
"""

from __future__ import annotations

import json
import os
import types
import typing
from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

SPEC_PAGE = "reference/spec.md"
CLI_PAGE = "reference/cli.md"
#: the width the command's help is wrapped at, whatever terminal builds the site
HELP_COLUMNS = "100"


def blocks(model: type[BaseModel], path: str = "") -> Iterator[tuple[str, type[BaseModel]]]:
    """(path, model) of the spec and of every block inside it, depth first: ("", RunSpec), ("dataset", ...)."""
    yield path, model
    for name, field in model.model_fields.items():
        for inner in models_in(field.annotation):
            yield from blocks(inner, f"{path}.{name}" if path else name)


def models_in(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models a field's type holds: the block itself, or the items of a list of blocks."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [model for argument in typing.get_args(annotation) for model in models_in(argument)]


def type_text(annotation: Any) -> str:
    """A field's type in words: `text`, `one of a, b`, `list of ...`, `... or null`."""
    origin, arguments = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        return type_text(arguments[0])
    if origin is typing.Literal:
        return "one of " + ", ".join(f"`{value}`" for value in arguments)
    if origin in (typing.Union, types.UnionType):
        named = [type_text(argument) for argument in arguments if argument is not type(None)]
        return " or ".join(named) + (" or null" if type(None) in arguments else "")
    if origin in (list, tuple):
        return f"list of {type_text(arguments[0])}" if arguments else "list"
    if origin is dict:
        return f"mapping of {type_text(arguments[0])} to {type_text(arguments[1])}" if arguments else "mapping"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "block"
    names = {str: "text", int: "integer", float: "number", bool: "true or false", typing.Any: "any value"}
    return names.get(annotation, getattr(annotation, "__name__", str(annotation)))


def default_text(field: FieldInfo) -> str:
    if field.default_factory is not None:
        value = field.default_factory()  # type: ignore[call-arg]  # the spec's factories take no arguments
        return "its defaults" if isinstance(value, BaseModel) else f"`{json.dumps(value)}`"
    if field.default is PydanticUndefined:
        return "required"
    return f"`{json.dumps(field.default.model_dump() if isinstance(field.default, BaseModel) else field.default)}`"


def cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def spec_reference() -> str:
    from nbtoolkit.spec import RunSpec

    lines = [
        "# Spec reference",
        "",
        "Every field of a spec, block by block, as the code defines them (generated from `nbtoolkit/spec.py`,",
        "`nbtoolkit/spec_parts/blocks.py` and each backend's block when the docs build). Every block is optional except",
        "`task`; a field left out takes its default. [Describe a run](../describe-a-run.md) shows a spec as a whole.",
    ]
    for path, model in blocks(RunSpec):
        title = "Top level" if not path else f"`{path}:`"
        doc = (model.__doc__ or "").strip().split("\n\n")[0]
        lines += ["", f"## {title}", ""]
        if path and doc:
            lines += [cell(doc), ""]
        lines += ["| field | type | default | description |", "|---|---|---|---|"]
        for name, field in model.model_fields.items():
            lines.append(
                f"| `{name}` | {cell(type_text(field.annotation))} | {cell(default_text(field))} "
                f"| {cell(field.description or '')} |"
            )
    return "\n".join(lines) + "\n"


def cli_reference() -> str:
    import argparse

    from nbtoolkit.cli import build_parser

    columns = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = HELP_COLUMNS
    try:
        parser = build_parser()
        commands = next(action for action in parser._actions if isinstance(action, argparse._SubParsersAction))
        lines = [
            "# CLI reference",
            "",
            "The `nbtoolkit` command's own help, command by command (generated from `nbtoolkit/cli.py` when the",
            "docs build).",
            "",
            "```text",
            "$ nbtoolkit --help",
            parser.format_help().rstrip(),
            "```",
        ]
        for name, command in commands.choices.items():
            lines += ["", f"## nbtoolkit {name}", "", "```text", f"$ nbtoolkit {name} --help"]
            lines += [command.format_help().rstrip(), "```"]
    finally:
        if columns is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = columns
    return "\n".join(lines) + "\n"


def on_files(files: Any, config: Any) -> Any:
    """MkDocs hook: add the generated pages to the site before its links and nav are checked."""
    from mkdocs.structure.files import File

    for page, text in ((SPEC_PAGE, spec_reference()), (CLI_PAGE, cli_reference())):
        files.append(File.generated(config, page, content=text))
    return files
