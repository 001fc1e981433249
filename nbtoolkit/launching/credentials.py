"""Credentials never land in job files: what looks like one, and how a job gets it anyway.

A flag or key whose name looks like a credential (`--hf_token`, `extra.hub_token`, `password`,
`api_key`, ...) has its literal value redacted to `***` in the spec every launch is rendered from,
so spec.json, launch.json, run.sh, the log's command line, SageMaker hyperparameters and the
exports never hold it. The way to pass one is the environment: a value `$HF_TOKEN` (or
`${HF_TOKEN}`) is written as that reference and resolved from the submitting environment when
the program starts (the supervisor inherits it), so the value is only ever in a process's memory.

What a program does with a value once it has it (a launcher that logs its command line, a script
that echoes its arguments in an error) is caught by the `Scrubber`: the supervisor knows every value
it resolves and every credential-named variable of its environment, and all it writes passes through it.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote, urlsplit

if TYPE_CHECKING:  # the supervisor redacts arguments without loading the spec's models (pydantic)
    from nbtoolkit.spec import RunSpec

#: a name (flag without dashes, key, environment variable) that looks like a credential
CREDENTIAL_NAME = re.compile(
    r"(^|_)(TOKEN|SECRET|PASSWORD|PASSWD|API_KEY|APIKEY|ACCESS_KEY|SECRET_KEY|PRIVATE_KEY|SESSION_TOKEN|CREDENTIALS?)($|_)"
)
#: an environment variable's name that looks like one, more widely: the words services end their variables with
#: (KAGGLE_KEY, GITHUB_PAT, HF_AUTH, DB_PASS, MYSQL_PWD but not the shell's PWD), and a password glued to its
#: service's name (PGPASSWORD). Only as
#: the last word (SSH_AUTH_SOCK and KEY_FILE hold paths), and never for a flag or key of a spec, whose value
#: would be refused or redacted (`--label_key`, `--sort_key`)
SECRET_VARIABLE = re.compile(r"(^|_)(KEY|PAT|AUTH|PASS|PASSPHRASE|CREDS)$|PASSWORD$|PASSWD$|_PWD$")
REDACTED = "***"
#: values shorter than this are not taken for secrets (a `..._TOKEN=1` switch would blank every digit 1)
MIN_SECRET_CHARS = 8
#: TrainingArguments fields that hold a credential -> the variable that gives it to the Trainer instead
#: (TrainingArguments is pickled into every checkpoint's training_args.bin; the Hub client reads HF_TOKEN)
TRAINER_CREDENTIALS = {"hub_token": "HF_TOKEN"}
#: a value that names an environment variable instead of holding the credential
ENV_REFERENCE = re.compile(r"^\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))\Z")


def is_credential(name: str) -> bool:
    """`--hf-token`, `hub_token`, `AWS_SECRET_ACCESS_KEY`: yes; `tokenizer_name`, `max_tokens`: no."""
    return bool(CREDENTIAL_NAME.search(name.lstrip("-").replace("-", "_").upper()))


def is_secret_variable(name: str) -> bool:
    """`HF_TOKEN`, `KAGGLE_KEY`, `GITHUB_PAT`: yes; `SSH_AUTH_SOCK`, `PATH`, `PWD`: no."""
    return is_credential(name) or bool(SECRET_VARIABLE.search(name.upper()))


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


def trainer_credentials(extra: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> tuple[dict, dict]:
    """`extra` without the credentials TrainingArguments would pickle, and the environment that gives them
    to the Trainer instead (`hub_token: $HF_TOKEN` -> HF_TOKEN); a reference to an unset variable gives none."""
    resolved = resolve_mapping(extra, environ)
    kept = {key: value for key, value in resolved.items() if key not in TRAINER_CREDENTIALS}
    given = {
        TRAINER_CREDENTIALS[key]: value
        for key, value in resolved.items()
        if key in TRAINER_CREDENTIALS and isinstance(value, str) and value != REDACTED and not env_reference(value)
    }
    return kept, given


def secret_values(environ: Mapping[str, str], names: Iterable[str] = ()) -> set[str]:
    """The values a job must never write: those of credential-named variables, and of the variables `names`
    (what its `$NAME` references resolve to)."""
    chosen = {name for name in environ if is_secret_variable(name)} | {name for name in names if name in environ}
    found = {environ[name] for name in chosen} | {url_password(value) or "" for value in environ.values()}
    return {value for value in found if len(value) >= MIN_SECRET_CHARS}


def url_password(value: str) -> str | None:
    """The password of a URL that carries one, whatever its variable's name: `DATABASE_URL=postgres://u:pw@h/db`."""
    if "://" not in value or "@" not in value:
        return None
    try:
        return urlsplit(value.strip()).password
    except ValueError:  # not a URL after all (an invalid port, a bracket)
        return None


def printed_forms(secret: str) -> set[str]:
    """How a program may print a secret: as given, stripped (a token pasted with a space or newline, which the
    Hub client and most programs strip before use), inside a JSON string (`json.dumps` escapes `"`, `\\`,
    control and, by default, non-ASCII characters), and URL-quoted or unquoted (a URL's password is kept quoted)."""
    forms = {secret, secret.strip()}
    escaped = {json.dumps(form, ensure_ascii=ascii)[1:-1] for form in forms for ascii in (True, False)}
    return forms | escaped | {quote(form, safe="") for form in forms} | {unquote(form) for form in forms}


class Scrubber:
    """Every known secret value replaced by `***`, in text, bytes, and a byte stream cut anywhere.

    The one filter for what a job writes or serves: its log (fed as a stream), its messages, its metrics.
    """

    def __init__(self, secrets: Iterable[str]) -> None:
        self.given = list(secrets)
        found = sorted(
            {form.encode() for secret in self.given for form in printed_forms(secret) if len(form) >= MIN_SECRET_CHARS},
            key=len,
            reverse=True,
        )
        self.secrets = found
        self.pattern = re.compile(b"|".join(re.escape(secret) for secret in found)) if found else None
        self.pending = b""  # the stream's tail that may be the start of a secret
        self.ends = frozenset(byte for secret in found for byte in secret[:-1])  # what a held tail may end with

    def __bool__(self) -> bool:
        return self.pattern is not None

    def stream(self) -> Scrubber:
        """A scrubber of the same secrets for a stream of its own (its held tail its own)."""
        return Scrubber(self.given)

    def scrubbed(self, data: bytes) -> bytes:
        return self.pattern.sub(REDACTED.encode(), data) if self.pattern is not None else data

    def text(self, text: str) -> str:
        if self.pattern is None:
            return text
        return self.scrubbed(text.encode("utf-8", "surrogatepass")).decode("utf-8", "surrogatepass")

    def value(self, value: Any) -> Any:
        """A string, or the strings in a list or mapping (a job row's values), scrubbed."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, list):
            return [self.value(item) for item in value]
        if isinstance(value, dict):
            return {key: self.value(item) for key, item in value.items()}
        return value

    def feed(self, chunk: bytes) -> bytes:
        """What of a stream can be written now: scrubbed, less a tail that may begin a secret the next chunk ends."""
        data = self.scrubbed(self.pending + chunk)
        held = (
            max(
                (size for secret in self.secrets for size in range(1, len(secret)) if data.endswith(secret[:size])),
                default=0,
            )
            if data and data[-1] in self.ends
            else 0
        )  # a line's end, mostly: no secret begins with it
        self.pending = data[len(data) - held :] if held else b""
        return data[: len(data) - held]

    def flush(self) -> bytes:
        """The stream's end: the tail held back (it began no secret)."""
        rest, self.pending = self.pending, b""
        return rest
