"""The Python API: `launch(spec) -> Job`, `jobs()`, and the Job handle notebooks and scripts hold."""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nbtoolkit import backends, views
from nbtoolkit import runner as job_control
from nbtoolkit.backends import dispatch
from nbtoolkit.backends.program import script_resume_arg
from nbtoolkit.hardware.precision import save_dtype
from nbtoolkit.inputs.preflight import input_findings
from nbtoolkit.lineage import chains
from nbtoolkit.lineage.checkpoints import is_complete, last_checkpoint
from nbtoolkit.lineage.fork import FORK_CHANGES, FORK_CHECKPOINT, KEEPS_FIT, fork_spec, refuse_training_nothing
from nbtoolkit.metrics import forecast, past_pace
from nbtoolkit.metrics.chain import FORKED_FROM, chain_records
from nbtoolkit.metrics.series import read_metrics
from nbtoolkit.rewards import with_rewards
from nbtoolkit.runner import health_watch
from nbtoolkit.runner.checkpoint_request import CHECKPOINT_WAIT_S, checkpoint_now
from nbtoolkit.runner.control import job_launch
from nbtoolkit.runner.health import job_health
from nbtoolkit.runner.stacks import take_stacks
from nbtoolkit.runner.store import AlreadyResumed, JobRecord, JobStore
from nbtoolkit.spec import RunSpec, load_spec
from nbtoolkit.trained_model.artifacts import fetch, model_artifact
from nbtoolkit.trained_model.serve import DEFAULT_HOST, DEFAULT_PORT, SERVE_TASK, SERVES_KEY, URL_KEY

if TYPE_CHECKING:
    from nbtoolkit.runner.warm_interpreter import WarmProfile

#: how long `resume` gives an ended job's supervisor to exit (it records the end, then leaves)
ENDING_S = 5.0


class Job:
    """A handle on one job. Cheap to create; every property reads the store afresh."""

    def __init__(self, job_id: str, store: JobStore | None = None) -> None:
        self.store = store or JobStore()
        self.id = self.store.get(job_id).id
        self._charts: list = []  # live charts this handle showed: `wait` lets them draw their last frame

    @property
    def record(self) -> JobRecord:
        return self.store.get(self.id)

    @property
    def status(self) -> str:
        return self.record.status

    @property
    def name(self) -> str:
        """The name listings show (the spec's `name`, else task and model)."""
        return self.record.name

    @property
    def dir(self) -> Path:
        return self.store.job_dir(self.id)

    @property
    def spec(self) -> RunSpec:
        return load_spec(self.dir / "spec.json")

    def wait(self, timeout: float | None = None) -> str:
        """Block until the job ends (or `timeout` seconds pass); returns the status.

        Charts this handle showed get to draw their final frame first, so a notebook run headless
        (or saved right after) keeps the finished chart, not the last one drawn while running.
        """
        record = job_control.wait(self.id, store=self.store, timeout=timeout)
        if not record.active:
            for chart in self._charts:
                chart.wait(timeout=30)
        return record.status

    def logs(self, tail: int | None = None) -> str:
        """The whole log, or with `tail` its last lines (read from the end, whatever the log's size)."""
        if tail:
            return job_control.log_tail(self.id, tail, store=self.store)
        text, _ = job_control.read_log(self.id, store=self.store)
        return text

    def records(self, chain: bool = False) -> list[dict[str, Any]]:
        """The job's metric records as written (one dict per metrics.jsonl line).

        With `chain`, those of the jobs it was resumed from too, as one series (see metrics.chain).
        """
        return chain_records(self.store, self.id) if chain else read_metrics(self.dir)

    def metrics(self, chain: bool = False):
        """The job's metrics as a pandas DataFrame, one row per record."""
        import pandas as pd

        return pd.DataFrame(self.records(chain=chain))

    def stop(self) -> str:
        return job_control.stop(self.id, store=self.store).status

    def resume(self, max_steps: int | None = None, budget_usd: float | None = None) -> Job:
        """A new job that continues this one from its last checkpoint (see `resume`)."""
        return resume(self.id, max_steps=max_steps, budget_usd=budget_usd, store=self.store)

    def health(self) -> dict[str, Any]:
        """ok | slow | stalled | unknown, the reason in one sentence, and each rank's last heartbeat (see runner.health)."""
        return job_health(self.store, self.record).to_dict()

    def stacks(self):
        """Every rank's Python stack now (py-spy), grouped by identical stacks; saved in the job's stacks/ folder."""
        return take_stacks(self.store, self.record)

    def checkpoint(self, wait: bool = True, timeout: float = CHECKPOINT_WAIT_S) -> Path | None:
        """Ask the running job to save a checkpoint at its next step and carry on; with `wait`, the checkpoint's folder
        once it is complete."""
        return checkpoint_now(self.store, self.record, wait=wait, timeout=timeout)

    def fork(self, checkpoint: str | Path | None = None, *, force: bool = False, **changes: Any) -> Job:
        """A new job from one of this job's checkpoints (default: its last complete one) with changed settings:
        `learning_rate=1e-4`, `batch_size=16`, `max_steps=200`, `budget_usd=5` (train fields), or dotted spec fields
        as `**{"train.learning_rate": 1e-4}`. Its chart continues this job's steps. A change that can take more
        memory (anything but the learning rate, the steps, the budget and the name) is checked as `launch` checks a
        spec (`force=True` only warns)."""
        spec, start, paths = fork_spec(self.id, self.spec, self.dir / "output", checkpoint, changes)
        child = launch(spec, store=self.store, force=force or set(paths) <= KEEPS_FIT)
        self.store.merge_info(
            child.id,
            {FORKED_FROM: self.id, FORK_CHECKPOINT: str(start), FORK_CHANGES: paths, **chains.lineage(self.record)},
        )
        return child

    def model(self, download: bool = True) -> Path | str:
        """The job's final model: its folder on this machine, fetched first (once, with a progress bar, checked)
        when the job ran remotely; with `download=False`, where it lives (a folder's or S3's URI), fetching
        nothing. merge, predict, evaluate, Try it and push_to_hub fetch it as they need it."""
        artifact = model_artifact(self.store, self.record)
        return fetch(artifact) if download else artifact.uri

    def merge(self, out: str | Path | None = None, dtype: str | None = None) -> Path:
        """The job's adapter merged into its base: a full model (default: the job's output/merged), in the dtype the
        base was saved in or `dtype` (fp32, bf16, fp16, or torch's float32, bfloat16, float16)."""
        out = Path(out or self.dir / "output" / "merged").resolve()
        try:
            chosen = ["--dtype", save_dtype(dtype)] if dtype else []
        except ValueError as exc:
            raise backends.LaunchError(f"merge {exc}") from None
        self.model()
        self._run_program(
            "nbtoolkit.train.adapters",
            "merge",
            "--spec",
            "spec.json",
            "--model-dir",
            "output/model",
            "--out",
            str(out),
            *chosen,
        )
        return out

    def predict(self, inputs: list | str | dict, checkpoint: str | Path | None = None) -> list[dict] | dict:
        """The trained model's answers: a label with its probabilities, a summary, an answer span with its score,
        a continuation, or a chat reply. `inputs`: one text (QA: a {question, context} dict; chat: a conversation)
        or a list; `checkpoint`: a checkpoint folder instead of the final model. The first call starts a process
        that keeps the model loaded; the next ones answer from it (see nbtoolkit.trained_model.warm_model)."""
        from nbtoolkit.trained_model import warm_model

        # a chat job's one conversation is a list of messages too
        single = not isinstance(inputs, list) or bool(inputs and isinstance(inputs[0], dict) and "role" in inputs[0])
        where = str(Path(checkpoint).expanduser().resolve()) if checkpoint else None
        if where is None:
            self.model()
        answers = warm_model.answers(self.id, self.dir, [inputs] if single else inputs, where)
        return answers[0] if single else answers

    def evaluate(
        self,
        dataset: str | Path | None = None,
        *,
        tasks: list[str] | str | None = None,
        limit: float | None = None,
        batch_size: int = 8,
    ):
        """The final model's eval metrics (the task's: accuracy, ROUGE, F1, perplexity; a chat job's loss and token
        accuracy, a preference job's rewards) on `dataset`: a split name of the job's dataset, or a local
        .jsonl/.json/.csv/.parquet file with the job's columns (a relative path is this process's, not the job's).

        With `tasks` (lm-evaluation-harness task names, e.g. ["hellaswag", "arc_easy"]; `limit` examples per task),
        lm-eval runs on the job's base and its tuned model instead, with the chat template the run trained with, and
        the comparison (per task and metric: base, tuned, difference, standard errors) is stored with the job and
        returned as a table with a chart (see nbtoolkit.trained_model.harness)."""
        import json

        if tasks is not None:
            from nbtoolkit.trained_model import harness

            names = [name.strip() for name in tasks.split(",")] if isinstance(tasks, str) else list(tasks)
            return harness.evaluate(self, [name for name in names if name], limit=limit, batch_size=batch_size)
        if dataset is None:
            raise backends.LaunchError("evaluate needs a dataset (a split name or a local file) or lm-eval tasks=[...]")
        if isinstance(dataset, Path) or Path(dataset).suffix:  # a file (a split name has no suffix)
            dataset = Path(dataset).expanduser().resolve()
        self.model()
        return json.loads(
            self._run_program("nbtoolkit.train.inference", "--evaluate", str(dataset)).strip().splitlines()[-1]
        )

    def export(self, format: str = "merged", out: str | Path | None = None, quant: str | None = None) -> Path:
        """The job's final model to serve elsewhere. merged (default: the job's export/merged): a full model folder,
        an adapter merged into its base, the chat template in tokenizer_config.json and chat_template.jinja alike, and
        the end-of-turn token among generation_config.json's end tokens. gguf (default: export/gguf): that folder as
        one llama.cpp file, `quant` f16 (default), bf16, q8_0 or q4_k_m; returns the file (see nbtoolkit.trained_model.export,
        nbtoolkit.trained_model.gguf_export)."""
        from nbtoolkit.trained_model.export import export_model

        return export_model(self, format, out, quant)

    def serve(self, port: int = DEFAULT_PORT, host: str = DEFAULT_HOST) -> Job:
        """An OpenAI-compatible server of the job's merged model (exported first when absent), as a job of its own
        that outlives this kernel; returned once it answers. Its name holds its URL; `.stop()` ends it (see
        nbtoolkit.trained_model.serve)."""
        from nbtoolkit.trained_model.serve import serve

        return Job(serve(self, port=port, host=host).id, self.store)

    def push_to_hub(self, repo_id: str, *, merged: bool = False, private: bool = True, token: str | None = None) -> str:
        """Upload the job's final model (with an adapter: the adapter alone, or the merged model with `merged`) and
        a generated model card to a Hub repository (created if missing). Returns the repository's URL."""
        from huggingface_hub import HfApi

        from nbtoolkit.inputs.bundled import is_bundled
        from nbtoolkit.trained_model.card import model_card

        record = self.record
        if record.status != "succeeded":
            raise backends.LaunchError(
                f"job {record.id} is {record.status}; only a succeeded job has a final model to push"
            )
        spec = self.spec
        folder = self.merge() if merged and spec.adapter else Path(self.model())
        (folder / "README.md").write_text(model_card(spec, record, self.records()))
        # the base beside an adapter is pushed only when it exists nowhere else (a bundled tiny model)
        ignore = ["training_args.bin", *([] if is_bundled(spec.model_name) else ["base/*"])]
        api = HfApi(token=token)
        url = api.create_repo(repo_id, private=private, exist_ok=True)
        api.upload_folder(
            repo_id=repo_id,
            folder_path=str(folder),
            ignore_patterns=ignore,
            commit_message=f"nbtoolkit job {record.id}: {spec.display_name}",
        )
        return str(url)

    def _run_program(self, module: str, *args: str) -> str:
        """Run one of nbtoolkit's torch programs in the job directory (this process never imports torch);
        its one-sentence error becomes a LaunchError. Returns its stdout."""
        import subprocess

        from nbtoolkit.launching.runtime import ERROR_PREFIX
        from nbtoolkit.runner.stage_boot import booted_env

        done = subprocess.run(
            [sys.executable, "-m", module, *args], cwd=self.dir, env=booted_env(), capture_output=True, text=True
        )
        if done.returncode:
            said = [line for line in done.stderr.splitlines() if line.startswith(ERROR_PREFIX)]
            raise backends.LaunchError(
                said[-1][len(ERROR_PREFIX) :].strip()
                if said
                else f"{module} failed on job {self.id}: {done.stderr.strip()[-500:]}"
            )
        return done.stdout

    def chart(self, *, log_scale: bool = False, smoothing: float = 0.6, live: str | None = None):
        """Show the job's live chart (loss, eval loss, throughput, progress) until it ends: drawn by the browser
        in JupyterLab, or with `live="kernel"` (or NBTOOLKIT_CHART=kernel) by the kernel."""
        chart = views.view("chart")(self, log_scale=log_scale, smoothing=smoothing, live=live)
        self._charts.append(chart)
        return chart

    def try_it(self, checkpoint: str | Path | None = None):
        """A "Try it" box: a text box and a button that show the trained model's answer (see `predict`); a running
        server's (`serve`) chats with the model it serves, through the server."""
        record = self.record
        if record.task == SERVE_TASK:
            if not record.active:
                raise backends.LaunchError(f"the server {record.id} is {record.status}; `nbtoolkit serve` starts one")
            return views.view("try_it")(Job(record.info[SERVES_KEY], self.store), None, record.info[URL_KEY])
        if record.status != "succeeded" and checkpoint is None:
            raise backends.LaunchError(
                f"job {record.id} is {record.status}; only a succeeded job has a final model "
                "to try (or give one of its checkpoints)"
            )
        if checkpoint is None:
            self.model()
        return views.view("try_it")(self, str(Path(checkpoint).resolve()) if checkpoint else None)

    def _ipython_display_(self) -> None:
        """In a notebook, a job shows itself as its notebook view (its live chart; when it succeeded, a Try it box)."""
        views.view("job")(self)

    def __repr__(self) -> str:
        record = self.record
        return f"<Job {record.id} {record.name!r} {record.backend} {record.status}>"


def plan(spec: RunSpec | dict | str | Path, *, store: JobStore | None = None, past_jobs: bool = True, **options: Any):
    """The planner's answer for a spec (see nbtoolkit.planner.plan for `options`), at the measured pace of
    past jobs of the same setup when the store has some and no `measured` pace is given; it says so. Its `refused`
    lists what launch would refuse in the spec's inputs (nbtoolkit.inputs.preflight: model, data, adapter targets), its
    `warned` what the job would not do as written (chat rows dataset.max_length cuts before their reply)."""
    from nbtoolkit.planner import ModelShapeError
    from nbtoolkit.planner import plan as planner_plan

    store = store or JobStore()
    chained = chains.resolve(load_spec(spec), store, fetching=False)  # a plan downloads nothing
    spec = chained.sizing  # an earlier job's model is sized by what the planner can read of it (its shape)
    past = past_pace.past_pace(spec, store) if past_jobs and not options.get("measured") else None
    if past:
        options = {**options, "measured": past.samples_per_second, "measured_from": past.describe()}
    refused, warned = input_findings(chained.spec)
    try:
        planned = planner_plan(spec, **options)
    except ModelShapeError:
        if refused:  # the model is not here to size: say why and how to fetch it
            raise ModelShapeError(refused[0]) from None
        raise
    ref = chained.info.get(chains.MODEL_REF)
    named = {"model": ref} if ref else {}  # job:ID, as the user wrote it
    transfers = backends.transfers(chained.spec)
    return planned.model_copy(update={"refused": refused, "warned": warned, "transfers": transfers, **named})


def launch(
    spec: RunSpec | dict | str | Path,
    *,
    store: JobStore | None = None,
    force: bool = False,
    rewards: list[Callable] | None = None,
    resumed_from: str | None = None,
    workdir: str | None = None,
    env: dict[str, str] | None = None,
    python: str | None = None,
) -> Job:
    """Check the spec, render its launch, and start it as a job that outlives this process.

    A spec the planner is sure will not fit in device (or host) memory is refused with a
    LaunchError unless `force=True` (then it only warns). `workdir`: where a user's script runs
    (default this process's directory; a resume gives the original job's). `env`: variables the
    launch adds (a rehearsal's offline switches), written in launch.json and run.sh like its own.
    """
    spec = load_spec(spec)
    if rewards:  # functions of this kernel, carried as their source in the spec (task grpo)
        spec = with_rewards(spec, rewards)
    store = store or JobStore()
    chained = chains.resolve(spec, store)  # `model: job:ID`: what the backend's machines read (fetched if need be)
    spec = chained.spec
    check_fit(chained.sizing, force=force)  # first: a batch that cannot fit is the spec's to change, wherever it runs
    dispatch.preflight(spec)
    launch_ = dispatch.render(spec)
    if workdir is not None and launch_.workdir is not None:
        launch_ = replace(launch_, workdir=workdir)
    if env:
        launch_ = replace(launch_, env={**launch_.env, **env})
    if python:
        stages = [
            replace(stage, argv=[python if a == sys.executable else a for a in stage.argv]) for stage in launch_.stages
        ]
        launch_ = replace(launch_, stages=stages)
    info = {
        **chained.info,
        "hourly_price_usd": spec.hardware.run_price_usd,  # the whole run's (x nodes), as the budget counts it
        past_pace.INFO_KEY: past_pace.setup_key(spec),
        forecast.INFO_KEY: forecast.forecast(spec, past_pace.past_pace(spec, store)),
        health_watch.ON_STALL_KEY: spec.train.on_stall,  # the supervisor's answer to a stall
        health_watch.ON_ANOMALY_KEY: spec.train.on_anomaly,  # and to a run whose numbers say it learns nothing
    }
    record = job_control.submit(
        launch_,
        name=spec.display_name,
        task=spec.task,
        store=store,
        info=info,
        resumed_from=resumed_from,
        # not a user's script: its own files left in reference cycles are flushed only by the exit's collections
        stage_boot=spec.hardware.target == backends.LOCAL and spec.script is None,
        warm=warm_profile(spec),
    )
    return Job(record.id, store)


def warm_profile(spec: RunSpec) -> WarmProfile | None:
    """What nbtoolkit's program starts with in a run that may fork from a warm interpreter (its own program on this
    machine, not compiled: torch.compile's cache folder is fixed as torch is imported); None: it starts in a new
    interpreter. Local runs on several processes are torchrun's and always start anew."""
    if spec.hardware.target != backends.LOCAL or spec.script is not None or spec.compile == "torch":
        return None
    from nbtoolkit.runner.warm_interpreter import WarmProfile
    from nbtoolkit.tasks import TASKS
    from nbtoolkit.train.program import unused_integrations

    return WarmProfile(unused_integrations(spec), TASKS[spec.task].program)


def resume(
    job_id: str, *, max_steps: int | None = None, budget_usd: float | None = None, store: JobStore | None = None
) -> Job:
    """Continue an ended job from its last complete checkpoint, as a new job with the same spec.

    The new job's record names the old one in `resumed_from`; its spec's `resume` is the
    checkpoint, so the global step, optimizer and scheduler carry on from there (to
    `max_steps` if given). `Job.records(chain=True)` reads both as one series. `budget_usd`
    sets the new job's train.budget_usd (each job's budget counts what that job spends).

    A job is resumed once: the store claims its resume atomically, and a second (or concurrent)
    resume answers with the job the first started. A user's script resumes if it takes a
    checkpoint (`--resume_from_checkpoint`, or `script.resume_arg`), in the original job's
    working directory, so its relative arguments mean what they meant.
    """
    old = Job(job_id, store)
    record = old.record
    if record.resumed_by:
        return Job(record.resumed_by, old.store)
    if record.active:
        raise backends.LaunchError(f"job {record.id} is still {record.status}; stop it before resuming it")
    leftovers = job_control.leftover_processes(record, old.store, settle=ENDING_S)
    if leftovers:
        raise backends.LaunchError(
            f"job {record.id} is {record.status} but {len(leftovers)} of its processes still "
            f"run (pids {', '.join(str(p.pid) for p in leftovers)}); `nbtoolkit stop "
            f"{record.id}` ends them, then resume"
        )
    old_spec = old.spec
    # a resumed job that saved none of its own (it failed at once) resumes from where it started
    started_from = old_spec.resume if old_spec.resume not in (None, "latest") and is_complete(old_spec.resume) else None
    checkpoint = last_checkpoint(old.dir / "output") or (Path(started_from) if started_from else None)
    if checkpoint is None:
        where = (
            "let the script write its checkpoints into the job folder (--output_dir $NBTOOLKIT_JOB_DIR/output)"
            if old_spec.script is not None
            else "set train.save_steps so that jobs save checkpoints"
        )
        raise backends.LaunchError(f"job {record.id} saved no complete checkpoint to resume from; {where}")
    if old_spec.script is not None and script_resume_arg(old_spec.script) is None:
        raise backends.LaunchError(
            f"job {record.id} ran {old_spec.script.path}, which takes no checkpoint to resume from (its source "
            "never reads resume_from_checkpoint); set script.resume_arg to the option it takes one with"
        )
    spec = old_spec.model_dump(mode="json")
    spec["resume"] = str(checkpoint)
    if max_steps is not None:
        spec["train"]["max_steps"] = max_steps
    if budget_usd is not None:
        spec["train"]["budget_usd"] = budget_usd
    if old_spec.script is None:  # a script's steps are its own arguments
        refuse_training_nothing(
            spec["train"]["max_steps"],
            checkpoint,
            f"resuming job {record.id}",
            f"nbtoolkit resume {record.id} --max-steps {{}}",
        )
    workdir = job_launch(old.dir).workdir
    try:  # the same spec already ran: the planner's fit check had its say at the first launch
        resumed = launch(spec, store=old.store, force=True, resumed_from=record.id, workdir=workdir)
    except AlreadyResumed as claimed:  # another resume of it got there first
        return Job(claimed.job_id, old.store)
    resumed.store.merge_info(resumed.id, chains.lineage(record))
    return resumed


def check_fit(spec: RunSpec, *, force: bool = False) -> None:
    """Refuse (or, forced, warn about) a launch the planner predicts will run out of memory.

    CPU runs on this machine are not checked; the planner is imported only for the others.
    """
    if spec.hardware.target == "local" and spec.hardware.accelerator == "cpu":
        return
    from nbtoolkit.planner import fit_problem

    problem = fit_problem(spec)
    if problem is None:
        return
    if not force:
        raise backends.LaunchError(problem)
    warnings.warn(problem, stacklevel=3)


def attach(name: str, *, region: str | None = None, backend: str = "sagemaker", store: JobStore | None = None) -> Job:
    """Follow a job started elsewhere (a SageMaker training job by default) as a job here: listed, logged,
    charted, stoppable."""
    follow = backends.get_backend(backend).attach
    if follow is None:
        raise backends.LaunchError(
            f"the {backend} backend cannot attach to a job started elsewhere; "
            f"attach works with: {', '.join(attachable())}"
        )
    launch_ = follow(name, region)
    store = store or JobStore()
    record = job_control.submit(launch_, name=name, task="attached", store=store)
    return Job(record.id, store)


def job(job_id: str, store: JobStore | None = None) -> Job:
    """The handle on a job by its id or a unique prefix of it (what `nbtoolkit jobs` lists)."""
    return Job(job_id, store)


def jobs(status: str | None = None, limit: int = 100, store: JobStore | None = None) -> list[Job]:
    """Known jobs, newest first."""
    store = store or JobStore()
    return [Job(record.id, store) for record in store.list([status] if status else None, limit=limit)]


def attachable() -> list[str]:
    """The backends that can follow a job started elsewhere."""
    return [name for name in backends.names() if backends.get_backend(name).attach is not None]
