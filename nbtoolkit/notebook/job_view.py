"""How a job shows itself as a cell's value: its live chart; while it runs, the run doctor (its health, one row
per rank with the slow or stalled ones marked, and Stacks / Checkpoint now / Fork buttons); when it
succeeded, a Try it box below."""

from __future__ import annotations

import html
from typing import Any

from IPython.display import display

#: how each health state and a marked rank are shown (colour, word)
STATE_COLOURS = {"ok": "#2e7d32", "slow": "#ef6c00", "stalled": "#c62828", "unknown": "#757575"}


def _number(value: Any, unit: str = "", digits: int = 3) -> str:
    return "" if value is None else f"{value:.{digits}g}{unit}"


def health_html(health: dict[str, Any]) -> str:
    """The health line and the per-rank table (step, last step ago, step time, memory), marked ranks in colour."""
    state = health["state"]
    head = (
        f"<p><b style='color: {STATE_COLOURS.get(state, '#757575')}'>{html.escape(state)}</b>: "
        f"{html.escape(health['reason'])}</p>"
    )
    if not health["ranks"]:
        return head
    rows = []
    for rank in health["ranks"]:
        mark = "stalled" if rank["stalled"] else "slow" if rank["slow"] else ""
        style = f" style='color: {STATE_COLOURS[mark]}; font-weight: bold'" if mark else ""
        memory = _number(rank["memory_mb"], " MiB", 4) + (f" ({rank['memory_kind']})" if rank["memory_mb"] else "")
        cells = [
            str(rank["rank"]),
            "" if rank["step"] is None else str(rank["step"]),
            _number(rank["last_step_ago"], " s", 2),
            _number(rank["step_time"], " s"),
            memory,
            html.escape(f"{rank['host']} / {rank['pid']}"),
            mark or ("exited" if rank["alive"] is False else ""),
        ]
        rows.append(f"<tr{style}>" + "".join(f"<td>{cell}</td>" for cell in cells) + "</tr>")
    titles = ("rank", "step", "last step", "step time", "memory", "host / pid", "")
    table = (
        "<table class='nbtoolkit-ranks'><thead><tr>"
        + "".join(f"<th>{title}</th>" for title in titles)
        + "</tr></thead><tbody>"
        + "".join(rows)
        + "</tbody></table>"
    )
    return head + table


def doctor_view(job):
    """The health table with Stacks, Checkpoint now and Fork (FIELD=VALUE ...) buttons; each answer (or the one
    sentence why not) shows below them, and the table refreshes with each click."""
    import ipywidgets as widgets

    from nbtoolkit.lineage.fork import fork_settings

    table = widgets.HTML(health_html(job.health()))
    settings = widgets.Text(placeholder="train.learning_rate=1e-4 max_steps=200", description="fork with")
    answer = widgets.Output()

    def act(action):
        def clicked(_button) -> None:
            answer.clear_output()
            with answer:
                try:
                    print(action())
                except Exception as exc:  # the doctor's one sentence (a job that cannot save, no checkpoint)
                    print(f"nbtoolkit: {exc}")
            table.value = health_html(job.health())

        return clicked

    def checkpoint() -> str:
        job.checkpoint(wait=False)
        return f"job {job.id} saves a checkpoint at its next steps and carries on"

    def fork() -> str:
        return f"forked: {job.fork(**fork_settings(settings.value.split()))!r}"

    buttons = []
    for label, action in (("Stacks", lambda: job.stacks().text()), ("Checkpoint now", checkpoint), ("Fork", fork)):
        button = widgets.Button(description=label)
        button.on_click(act(action))
        buttons.append(button)
    return widgets.VBox([table, widgets.HBox([*buttons, settings]), answer])


def show_job(job, log_scale: bool = False) -> None:
    job.chart(log_scale=log_scale)
    if job.record.active:
        display(doctor_view(job))
    elif job.status == "succeeded":
        display(job.try_it())
