"""Credentials never land in job files: what looks like one, and how a job gets it anyway.

A flag or key whose name looks like a credential (`--hf_token`, `extra.hub_token`, `password`,
`api_key`, ...) has its literal value redacted to `***` in the spec every launch is rendered from,
so spec.json, launch.json, run.sh, the log's command line, SageMaker hyperparameters and the
exports never hold it. The way to pass one is the environment: a value `$HF_TOKEN` (or
`${HF_TOKEN}`) is written as that reference and resolved from the submitting environment when
the program starts (the supervisor inherits it), so the value is only ever in a process's memory.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from nbtoolkit.spec import RunSpec

#: a name (flag without dashes, key, environment variable) that looks like a credential
CREDENTIAL_NAME = re.compile(
    r"(^|_)(TOKEN|SECRET|PASSWORD|PASSWD|API_KEY|APIKEY|ACCESS_KEY|SECRET_KEY|PRIVATE_KEY|SESSION_TOKEN|CREDENTIALS?)($|_)"
)
REDACTED = "***"
#: a value that names an environment variable instead of holding the credential
ENV_REFERENCE = re.compile(r"^\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))$")


def is_credential(name: str) -> bool:
    """`--hf-token`, `hub_token`, `AWS_SECRET_ACCESS_KEY`: yes; `tokenizer_name`, `max_tokens`: no."""
    return bool(CREDENTIAL_NAME.search(name.lstrip("-").replace("-", "_").upper()))


def env_reference(value: Any) -> str | None:
    """The variable a `$NAME` / `${NAME}` value refers to, else None."""
    match = ENV_REFERENCE.match(value) if isinstance(value, str) else None
    return (match.group(1) or match.group(2)) if match else None


def _hidden(value: Any) -> Any:
    """A credential's value as written: an environment reference stays, anything else is redacted."""
    return value if env_reference(value) else REDACTED


def _credential_values(args: list[str]) -> Iterator[tuple[int, str, str]]:
    """(index, prefix, value) of each credential value in argv: `--hf_token X` gives (1, "", X) and
    `--hf_token=X` (0, "--hf_token=", X)."""
    value_next = False
    for index, arg in enumerate(args):
        flag, equals, value = arg.partition("=")
        if value_next:
            yield index, "", arg
        elif arg.startswith("-") and equals and is_credential(flag):
            yield index, flag + equals, value
        value_next = arg.startswith("-") and not equals and is_credential(arg)


def _replaced(args: list[str], replace: Callable[[str], str]) -> list[str]:
    replaced = list(args)
    for index, prefix, value in _credential_values(args):
        replaced[index] = prefix + replace(value)
    return replaced


def redact_args(args: list[str]) -> list[str]:
    return _replaced(args, _hidden)


def redact_mapping(values: Mapping[str, Any]) -> dict[str, Any]:
    """`values` with every credential-named key's value redacted."""
    return {key: _hidden(value) if is_credential(key) else value for key, value in values.items()}


def literal_credentials(args: list[str], values: Mapping[str, Any]) -> list[str]:
    """The flags and keys that hold a credential's value itself (which redaction takes from the run)."""
    flags = [
        prefix.rstrip("=") or args[index - 1]
        for index, prefix, value in _credential_values(args)
        if not env_reference(value)
    ]
    return flags + [key for key, value in values.items() if is_credential(key) and not env_reference(value)]


def references(args: list[str], values: Mapping[str, Any]) -> list[str]:
    """The environment variables the credential values of `args` and `values` refer to."""
    found = [env_reference(value) for _, _, value in _credential_values(args)]
    found += [env_reference(value) for key, value in values.items() if is_credential(key)]
    return [name for name in found if name]


def _resolved(value: Any, environ: Mapping[str, str]) -> Any:
    name = env_reference(value)
    return environ[name] if name and name in environ else value


def resolve_args(args: list[str], environ: Mapping[str, str] | None = None) -> list[str]:
    """argv with `$NAME` credential values replaced by the variable's value (when it is set)."""
    environ = os.environ if environ is None else environ
    return _replaced(args, lambda value: _resolved(value, environ))


def resolve_mapping(values: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    environ = os.environ if environ is None else environ
    return {key: _resolved(value, environ) if is_credential(key) else value for key, value in values.items()}


def shell_args(args: list[str]) -> list[str]:
    """argv as bash words: each quoted, a credential's `$NAME` as `"${NAME}"` so the shell supplies it."""
    words = [shlex.quote(arg) for arg in args]
    for index, prefix, value in _credential_values(args):
        if env_reference(value):
            words[index] = f'{shlex.quote(prefix) if prefix else ""}"${{{env_reference(value)}}}"'
    return words


def redact_spec(spec: RunSpec) -> RunSpec:
    """The spec as it may be written: credential values in script.args and extra redacted."""
    updates: dict[str, Any] = {"extra": redact_mapping(spec.extra)}
    if spec.script is not None:
        updates["script"] = spec.script.model_copy(update={"args": redact_args(spec.script.args)})
    return spec.model_copy(update=updates)


def credential_problem(spec: RunSpec, environ: Mapping[str, str] | None = None) -> str | None:
    """One sentence when a spec would launch with a credential it cannot have: one written into the spec
    (redacted from every file, so the run would get `***`), or a reference to an unset variable."""
    environ = os.environ if environ is None else environ
    args = spec.script.args if spec.script is not None else []
    literal = literal_credentials(args, spec.extra)
    if literal:
        name = literal[0].lstrip("-").replace("-", "_").upper()
        return (
            f"{literal[0]} holds a credential, and nbtoolkit writes no credentials into job files; pass it "
            f"from the environment instead: `export {name}=...` before launching and give ${name} as its value"
        )
    named = references(args, spec.extra)
    if named and spec.hardware.target == "sagemaker":
        return (
            f"${named[0]} cannot reach a SageMaker job: its container does not see this environment, and "
            "hyperparameters are shown in the console; give the job its credential through AWS Secrets Manager "
            "or its role"
        )
    missing = next((name for name in named if name not in environ), None)
    if missing:
        return (
            f"${missing} is not set in this environment; export {missing} before launching (its value is "
            "handed to the job's processes, never written)"
        )
    return None
