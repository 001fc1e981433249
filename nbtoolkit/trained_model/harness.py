"""lm-evaluation-harness on a finished job's model and on its base, side by side.

nbtoolkit runs lm-eval's own command line (`python -m lm_eval run --model hf ...`) once per model, so the numbers
are the ones a person gets running that command by hand on the same folder; the commands are stored with the
results (the job's `eval/harness.json`). The tuned model is the job's final model (an adapter merged into its
base); the base is the model the job started from, when it exists outside the job, read through the tuned model's
tokenizer (a saved base may have none; a chat run's template is the tuned model's). A job that trained with a chat
template is evaluated with it (`--apply_chat_template`). Light: lm-eval, torch and transformers run in the child processes only.
"""

from __future__ import annotations

import glob
import json
import os
import shlex
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nbtoolkit.backends import LaunchError
from nbtoolkit.inputs.bundled import ASSETS
from nbtoolkit.lineage.chains import MODEL_FROM
from nbtoolkit.runner.store import JobNotFound
from nbtoolkit.tasks import TASKS, TRL_TASKS
from nbtoolkit.trained_model.artifacts import fetch, model_artifact
from nbtoolkit.trained_model.saved_folders import base_weights, is_adapter_folder

#: nbtoolkit's own harness tasks (lm-eval's YAML task format, data beside them), on every run's include path
HARNESS_TASKS = ASSETS / "harness"
#: the results of a job's last evaluation, in its folder
RESULTS_FILE = "eval/harness.json"
#: the models compared, in the order they are run and shown
MODELS = ("base", "tuned")
INSTALL = "lm-eval is not installed; install it with pip install 'nbtoolkit-finetune[eval]'"


@dataclass(frozen=True)
class HarnessResults:
    """Per task and metric: the base's and the tuned model's values, their difference and standard errors."""

    rows: list[dict[str, Any]]
    #: model -> the lm-eval command that measured it (None: that model was not evaluated, with `missing` saying why)
    commands: dict[str, list[str] | None]
    missing: str | None = None
    tasks: list[str] = field(default_factory=list)
    #: examples per task (a count, or a fraction of each task); None: every example
    limit: float | None = None

    @property
    def note(self) -> str:
        """What the numbers are of, in words: how many examples, and a base that was not evaluated."""
        said = [] if self.limit is None else [f"on the first {limit_text(self.limit)} of each task"]
        return "; ".join([*said, *([self.missing] if self.missing else [])])

    def table(self):
        """The comparison as a pandas DataFrame (task, metric, base, tuned, difference, base_stderr, tuned_stderr)."""
        import pandas as pd

        numbers = ["base", "tuned", "difference", "base_stderr", "tuned_stderr"]
        return pd.DataFrame(self.rows, columns=["task", "metric", *numbers]).astype(dict.fromkeys(numbers, float))

    def figure(self):
        """Base and tuned side by side per task and metric, with their standard errors (a new Figure each call)."""
        from nbtoolkit.metrics.plots import COLORS, new_figure

        figure, axes = new_figure(max(5.0, 1.4 * len(self.rows) + 2), 3.6, top=0.86)
        width = 0.38
        for offset, model, color in ((-width / 2, "base", COLORS[0]), (width / 2, "tuned", COLORS[1])):
            values = [row[model] for row in self.rows]
            errors = [row[f"{model}_stderr"] or 0 for row in self.rows]
            places = [index + offset for index, value in enumerate(values) if value is not None]
            shown = [(value, error) for value, error in zip(values, errors, strict=True) if value is not None]
            axes.bar(places, [v for v, _ in shown], width, yerr=[e for _, e in shown], color=color, label=model)
        axes.set_xticks(range(len(self.rows)), [f"{row['task']}\n{row['metric']}" for row in self.rows], fontsize=8)
        axes.set_title("lm-evaluation-harness: base and tuned (bars: standard error)")
        axes.legend(fontsize=8)
        axes.margins(y=0.15)
        return figure

    def _ipython_display_(self) -> None:
        from IPython.display import HTML, Image, display

        from nbtoolkit.metrics.plots import png

        note = f"<p>{self.note}</p>" if self.note else ""
        display(HTML(self.table().to_html(index=False, float_format=lambda value: f"{value:.4f}", na_rep="-") + note))
        if self.rows:
            display(Image(png(self.figure()), format="png"))

    def __repr__(self) -> str:
        text = self.table().to_string(index=False, float_format=lambda value: f"{value:.4f}", na_rep="-")
        return text + (f"\n{self.note}" if self.note else "")

    def to_json(self) -> dict[str, Any]:
        return {"tasks": self.tasks, "limit": self.limit, "rows": self.rows, "commands": self.commands,
                "missing": self.missing}  # fmt: skip

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> HarnessResults:
        return cls(data["rows"], data["commands"], data.get("missing"), data.get("tasks", []), data.get("limit"))


def limit_text(limit: float) -> str:
    return f"{limit:.0%}" if limit < 1 else f"{int(limit):,} examples"


def check_limit(limit: float | None) -> None:
    """lm-eval's --limit: a count of examples (a whole number, at least 1) or a fraction of each task (0 to 1)."""
    if limit is not None and not (0 < limit < 1 or (limit >= 1 and float(limit).is_integer())):
        raise LaunchError(
            f"limit {limit:g} is not a number of examples per task; give a whole number of at least 1, or a "
            "fraction between 0 and 1 of each task"
        )


def check_task(task: str) -> None:
    """lm-eval scores language models: jobs of the causal LM tasks only."""
    if TASKS[task].head != "causal-lm":
        raise LaunchError(
            f"lm-eval evaluates language models, and this job's task is {task}; use job.evaluate(dataset) for its "
            "own metrics"
        )


def base_model(spec, tuned_from: Path, started_from: Path | None = None) -> tuple[dict[str, str] | None, str | None]:
    """(lm-eval's model_args for the model the job started from; or None and why it cannot be evaluated).
    `started_from`: the earlier job's model folder here, for a job whose `model:` named one (`job:ID`)."""
    if is_adapter_folder(tuned_from):  # its base is saved beside it when it exists nowhere else
        return {"pretrained": base_weights(tuned_from, fallback=spec.model)}, None
    source = str(started_from) if started_from else spec.model
    if source is None:
        return None, "the base is the bundled tiny model, built with random weights inside the run and not kept"
    if "://" in source:  # an earlier job's model data that job is no longer here to fetch
        return None, f"the base is {source}, and the job that made it is no longer in this job store"
    if source.startswith(("/", "~")) and not Path(source).expanduser().exists():
        return None, f"the base was {source}, which no longer exists"
    if is_adapter_folder(source):  # an earlier adapter job: its base with its adapter, as lm-eval loads one
        return {"pretrained": base_weights(source), "peft": source}, None
    return {"pretrained": source}, None


def command(
    model_args: dict[str, str],
    tasks: list[str],
    out: Path,
    *,
    chat_template: bool = False,
    limit: float | None = None,
    batch_size: int = 8,
) -> list[str]:
    """lm-eval's own command line for one model (what a person would type)."""
    found = [
        sys.executable, "-m", "lm_eval", "run",
        "--model", "hf",
        "--model_args", ",".join(f"{key}={checked(value)}" for key, value in model_args.items()),
        "--tasks", ",".join(tasks),
        "--include_path", str(HARNESS_TASKS),
        "--batch_size", str(batch_size),
        "--output_path", str(out),
    ]  # fmt: skip
    if limit is not None:
        found += ["--limit", str(int(limit)) if limit >= 1 else repr(float(limit))]
    if chat_template:
        found.append("--apply_chat_template")
    return found


def checked(path: str) -> str:
    """lm-eval splits --model_args at commas, with no escape: a path holding one would name another folder."""
    if "," in path:
        raise LaunchError(
            f"lm-eval cannot be given {path}: its --model_args split at commas, and the path holds one; move the "
            "model (or the job store, NBTOOLKIT_HOME) to a path without a comma"
        )
    return path


def validate_tasks(tasks: list[str]) -> None:
    """lm-eval's own check of the task names (`lm-eval validate`), before any model is merged or loaded."""
    argv = [
        sys.executable,
        "-m",
        "lm_eval",
        "validate",
        "--tasks",
        ",".join(tasks),
        "--include_path",
        str(HARNESS_TASKS),
    ]
    done = subprocess.run(argv, capture_output=True, text=True, env={**os.environ, "TOKENIZERS_PARALLELISM": "false"})
    if done.returncode:
        lines = (done.stdout + done.stderr).strip().splitlines()
        said = next((line for line in reversed(lines) if "not found" in line.lower()), lines[-1] if lines else "")
        raise LaunchError(
            f"lm-eval does not know every task asked for ({said.strip()[:300]}); `lm-eval ls tasks` lists them, and "
            "nbtoolkit_tiny is the bundled one"
        )


def run(argv: list[str], say: Callable[[str], None]) -> dict[str, Any]:
    """Run one lm-eval command, its whole output in a log beside its results (its table said when it ends);
    returns its results file's content."""
    out = Path(argv[argv.index("--output_path") + 1])
    out.mkdir(parents=True, exist_ok=True)
    log = out.with_suffix(".log")
    say(f"  its command and output: {log}")
    before = set(glob.glob(str(out / "**" / "results_*.json"), recursive=True))
    with log.open("w") as written:
        written.write(f"$ {shlex.join(argv)}\n")
        written.flush()
        done = subprocess.run(
            argv, stdout=written, stderr=subprocess.STDOUT, env={**os.environ, "TOKENIZERS_PARALLELISM": "false"}
        )
    lines = log.read_text(errors="replace").splitlines()
    if done.returncode:
        said = next((line for line in reversed(lines) if "Error" in line), lines[-1] if lines else "no output")
        raise LaunchError(f"lm-eval failed ({said.strip()[:300]}); its output is in {log}")
    made = sorted(set(glob.glob(str(out / "**" / "results_*.json"), recursive=True)) - before)
    if not made:
        raise LaunchError(f"lm-eval wrote no results under {out}; its output is in {log}")
    say("\n".join(line for line in lines if line.startswith("|")))  # lm-eval's own table
    return json.loads(Path(made[-1]).read_text())


def rows(tasks: list[str], results: dict[str, dict[str, Any] | None]) -> list[dict[str, Any]]:
    """One row per task and metric lm-eval reported, in the order of `tasks` (a group's own row first)."""
    found: list[dict[str, Any]] = []
    measured = {model: (result or {}).get("results", {}) for model, result in results.items()}
    reference = measured["tuned"]
    names = [name for name in tasks if name in reference]
    names += sorted(name for name in reference if name not in names)
    for name in names:
        for key, value in reference[name].items():
            metric, _, kind = key.partition(",")
            if not kind or metric.endswith("_stderr") or not isinstance(value, (int, float)):
                continue
            row: dict[str, Any] = {"task": name, "metric": metric if kind == "none" else key}
            for model in MODELS:
                scores = measured[model].get(name, {})
                row[model] = _number(scores.get(key))
                row[f"{model}_stderr"] = _number(scores.get(f"{metric}_stderr,{kind}"))
            row["difference"] = None if row["base"] is None else row["tuned"] - row["base"]
            found.append(row)
    return found


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) else None  # lm-eval writes "N/A" for no stderr


def evaluate(
    job,
    tasks: list[str],
    *,
    limit: float | None = None,
    batch_size: int = 8,
    say: Callable[[str], None] = print,
) -> HarnessResults:
    """Run lm-eval's `tasks` on the job's base and its tuned model, store the comparison with the job, return it."""
    import importlib.util

    if importlib.util.find_spec("lm_eval") is None:
        raise LaunchError(INSTALL)
    if not tasks:
        raise LaunchError("name at least one lm-eval task, e.g. tasks=['hellaswag'] (or the bundled nbtoolkit_tiny)")
    check_limit(limit)
    spec = job.spec
    check_task(spec.task)
    if job.record.status != "succeeded":
        raise LaunchError(f"job {job.id} is {job.record.status}; only a succeeded job has a final model to evaluate")
    validate_tasks(tasks)
    folder = Path(job.model())
    out = job.dir / "eval" / "harness"
    adapter = is_adapter_folder(folder)
    tuned = job.merge(out / "merged") if adapter else folder  # its own merge: the job's output/merged stays as made
    base, missing = base_model(spec, folder, None if adapter else started_from(job))
    chat = spec.task in TRL_TASKS
    if base is not None:  # the base reads prompts as the tuned model does: its tokenizer (and chat template)
        base = {**base, "tokenizer": str(tuned)}
    options: dict[str, Any] = {"chat_template": chat, "limit": limit, "batch_size": batch_size}
    commands: dict[str, list[str] | None] = {
        "base": None if base is None else command(base, tasks, out / "base", **options),
        "tuned": command({"pretrained": str(tuned)}, tasks, out / "tuned", **options),
    }
    results: dict[str, dict[str, Any] | None] = {}
    for model in MODELS:
        argv = commands[model]
        if argv is not None:
            say(f"lm-eval on the {model} model ({argv[argv.index('--model_args') + 1]})")
        results[model] = run(argv, say) if argv is not None else None
    found = HarnessResults(
        rows(tasks, results), commands, f"base not evaluated: {missing}" if missing else None, tasks, limit
    )
    path = job.dir / RESULTS_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(found.to_json(), indent=2))
    return found


def started_from(job) -> Path | None:
    """The model folder, here, of the earlier job this one started from (`model: job:ID`; fetched if remote); None
    when that job or its folder is gone (the spec's model is then what is left)."""
    earlier = job.record.info.get(MODEL_FROM)
    try:
        return None if earlier is None else fetch(model_artifact(job.store, job.store.get(earlier)))
    except (JobNotFound, LaunchError):
        return None


def stored(job_dir: Path) -> HarnessResults | None:
    """The job's last harness comparison, if it has one."""
    path = job_dir / RESULTS_FILE
    return HarnessResults.from_json(json.loads(path.read_text())) if path.is_file() else None
