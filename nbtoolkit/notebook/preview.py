"""What a spec would launch, shown before anything starts: its YAML, command, files and checks.

The form's preview tabs and `%finetune --dry-run` show the same Preview; nothing here starts a
process or reaches the network.
"""

from __future__ import annotations

import html
import warnings
from dataclasses import dataclass

from nbtoolkit import backends
from nbtoolkit.backends import LaunchError, dispatch
from nbtoolkit.launching.launch import Launch
from nbtoolkit.lineage import chains
from nbtoolkit.spec import RunSpec, SpecError, SpecWarning, load_spec, spec_warnings


def checks(spec: RunSpec, sizing: RunSpec | None = None) -> list[str]:
    """Every check that applies to the spec, one sentence each (`sizing`: the spec the planner sizes, when an
    earlier job's model stands in the spec).

    Advice about the spec first, then the planner's memory, fit, time and cost (its config-only
    estimate, without ranking alternatives: fast enough to run as the user types), then whether
    this machine can start it. The form and `--dry-run` both show these.
    """
    from nbtoolkit.hardware.catalog import CatalogError
    from nbtoolkit.planner import ModelShapeError, plan

    found = list(spec_warnings(spec))
    try:
        planned = plan(sizing or spec, alternatives=False).model_copy(update={"transfers": backends.transfers(spec)})
        found += [line.strip() for line in planned.summary_lines()]
    except (ModelShapeError, CatalogError) as exc:
        found.append(f"no plan: {exc.args[0] if exc.args else exc}")
    try:
        dispatch.preflight(spec)
    except LaunchError as exc:
        found.append(f"cannot launch here: {exc}")
    else:
        found.append(f"this machine can start it ({backends.backend_name(spec)} launcher)")
    return found


@dataclass(frozen=True)
class Preview:
    """A spec and what launching it would do; `launch` is None when no backend can render it."""

    spec: RunSpec
    launch: Launch | None
    launch_error: str | None
    checks: list[str]

    @property
    def yaml(self) -> str:
        return self.spec.to_yaml()

    @property
    def command(self) -> str:
        """run.sh (what a user can run by hand), or why there is none."""
        return self.launch.run_sh() if self.launch else f"no launch: {self.launch_error}"

    @property
    def files(self) -> dict[str, str]:
        """Files the launch writes next to run.sh (spec.json, ds_config.json, SageMaker code, ...)."""
        return dict(self.launch.files) if self.launch else {}

    def sections(self) -> dict[str, str]:
        """Title -> HTML: the form's preview tabs, and `--dry-run`'s output in that order."""
        files = (
            "".join(
                f"<details><summary><code>{html.escape(name)}</code></summary>{pre(text)}</details>"
                for name, text in self.files.items()
            )
            or "<i>no files</i>"
        )
        items = "".join(f"<li>{html.escape(line)}</li>" for line in self.checks)
        return {
            "Spec (YAML)": pre(self.yaml),
            "Command": pre(self.command),
            "Files": files,
            "Checks": f"<ul>{items}</ul>",
        }

    def _repr_html_(self) -> str:
        return "".join(f"<h4>{title}</h4>{body}" for title, body in self.sections().items())

    def __str__(self) -> str:
        parts = [f"# spec\n{self.yaml}", f"# command\n{self.command}"]
        parts += [f"# file {name}\n{text}" for name, text in self.files.items()]
        parts.append("# checks\n" + "\n".join(f"- {line}" for line in self.checks))
        return "\n".join(parts)


def preview(spec: RunSpec) -> Preview:
    """What launching `spec` would do; `model: job:ID` as the launch would resolve it (nothing is fetched)."""
    try:
        resolved = chains.in_default_store(spec, fetching=False)
    except LaunchError as exc:  # the job it names is not there, or has no model
        return Preview(spec=spec, launch=None, launch_error=str(exc), checks=[f"cannot launch here: {exc}"])
    try:
        launch, error = dispatch.render(resolved.spec), None
    except (LaunchError, SpecError) as exc:  # SpecError: a reward file the render ships is not there (RewardError)
        launch, error = None, str(exc)
    return Preview(spec=spec, launch=launch, launch_error=error, checks=checks(resolved.spec, resolved.sizing))


def pre(text: str) -> str:
    return f"<pre style='white-space: pre-wrap; margin: 0'>{html.escape(text)}</pre>"


def quiet_load(data) -> RunSpec:
    """`load_spec` without SpecWarning noise: views show the same advice in their checks."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SpecWarning)
        return load_spec(data)
