"""The configuration form (ipywidgets 8): a RunSpec as widgets, with live previews and buttons.

The widgets' values become a spec dict that `load_spec` validates, the same way the `%finetune`
flags do; the spec's own sentence appears next to the field it names. Only the fields that apply
to the current choices are shown. Widget kinds, choices and defaults come from the spec's model.
"""

from __future__ import annotations

import contextlib
import copy
import html
import threading
import time
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import ipywidgets as widgets
import yaml
from pydantic import ValidationError

from nbtoolkit.backends import LaunchError
from nbtoolkit.lineage import chains
from nbtoolkit.notebook.form_sections import ADAPTER, FIELDS, FORM_CHOICES, OWNED, SECTIONS, SOURCE, Values
from nbtoolkit.notebook.preview import pre, preview, quiet_load
from nbtoolkit.notebook.spec_fields import (
    choices,
    default,
    describe,
    free_list,
    get_value,
    list_entries,
    named_fields,
    optional,
    remove_value,
    set_value,
    value_type,
)
from nbtoolkit.spec import RunSpec, SpecError
from nbtoolkit.spec_parts.blocks import HardwareSpec
from nbtoolkit.tasks import TASK_NAMES

LABEL_WIDTH = "150px"
ERROR_COLOR = "var(--jp-error-color1, #d32f2f)"
PLACEHOLDERS = {
    "model": "bundled tiny model for the task",
    "dataset.files.train": "data/train.jsonl",
    "dataset.files.validation": "data/validation.jsonl",
}


def make_widget(path: str, label: str, value: Any, look: Look) -> widgets.ValueWidget:
    """A widget of the kind the spec field's type asks for, labelled, with its description as tooltip.

    Everything is given at construction: each later change would be one more message to the browser.
    """
    common = {"description": label, "_dom_classes": ("nbtoolkit-field-" + path.replace(".", "-").replace("_", "-"),)}
    if path in FORM_CHOICES:
        return widgets.Dropdown(options=FORM_CHOICES[path], value=value, **common, **look.of(widgets.Dropdown))
    common["tooltip"] = describe(path) or None
    options = choices(path)
    kind = value_type(path)
    if free_list(path):  # an entry a line (list_entries); a function shipped from the kernel as its name
        return widgets.Textarea(
            value="\n".join(str(entry["name"] if isinstance(entry, Mapping) else entry) for entry in value or ()),
            rows=2,
            continuous_update=True,
            placeholder=describe(path),
            **common,
            **look.of(widgets.Textarea),
        )
    if typing.get_origin(kind) is list:  # several of a Literal's values (report_to)
        allowed = typing.get_args(typing.get_args(kind)[0])
        return widgets.SelectMultiple(
            options=allowed, value=tuple(value or ()), rows=len(allowed), **common, **look.of(widgets.SelectMultiple)
        )
    if options:
        return widgets.Dropdown(
            options=[(str(option), option) for option in options], value=value, **common, **look.of(widgets.Dropdown)
        )
    if kind is bool and optional(path):  # unset means the task's default (train.gradient_checkpointing)
        return widgets.Dropdown(
            options=[("task default", None), ("on", True), ("off", False)],
            value=value,
            **common,
            **look.of(widgets.Dropdown),
        )
    if kind is bool:
        return widgets.Checkbox(value=value, **common, **look.of(widgets.Checkbox))
    if kind is int and not optional(path):
        return widgets.IntText(value=value, continuous_update=True, **common, **look.of(widgets.IntText))
    if kind is float and not optional(path):
        return widgets.FloatText(value=value, continuous_update=True, **common, **look.of(widgets.FloatText))
    return widgets.Text(
        value="" if value is None else str(value),
        continuous_update=True,
        placeholder=PLACEHOLDERS.get(path, describe(path)),
        **common,
        **look.of(widgets.Text),
    )


class Look:
    """One layout and one style per widget class, shared: each is a widget model of its own, and
    a form of ~60 fields would otherwise open ~250 models where ~100 do (it must open in < 0.5 s)."""

    def __init__(self) -> None:
        self.layout = widgets.Layout(width="95%")
        self.styles: dict[type, widgets.Widget] = {}

    def of(self, kind: type, layout: widgets.Layout | None = None) -> dict[str, Any]:
        if kind not in self.styles:
            style = kind.class_traits()["style"].klass
            self.styles[kind] = (
                style(description_width=LABEL_WIDTH) if "description_width" in style.class_traits() else style()
            )
        return {"layout": layout or self.layout, "style": self.styles[kind]}


def _initial(data: Mapping[str, Any], path: str) -> Any:
    if path == SOURCE:
        return "files" if get_value(data, "dataset.files") else "hub" if get_value(data, "dataset.name") else "bundled"
    if path == ADAPTER:
        return get_value(data, "adapter.type", missing="lora") if get_value(data, "adapter") is not None else "none"
    value = get_value(data, path, missing=default(path))
    if path == "task" and value is None:
        return TASK_NAMES[0]
    return value


class SpecForm(widgets.VBox):
    """Describe a run with widgets; preview its YAML, command, files, checks and data; launch or export it."""

    def __init__(self, spec: RunSpec | Mapping[str, Any] | str | None = None) -> None:
        data = dict(spec) if isinstance(spec, Mapping) else quiet_load(spec).to_dict() if spec else {}
        if isinstance(spec, Mapping):
            with contextlib.suppress(SpecError):  # a valid spec opens as loaded (an instance's devices filled in)
                data = quiet_load(data).to_dict()
        if any(
            _initial(data, path) not in choices(path) for path in FIELDS if path not in FORM_CHOICES and choices(path)
        ):
            quiet_load(data)  # a value no dropdown offers: raise the spec's own sentence for it
        self.base = copy.deepcopy(data)
        #: a list field's entries shipped as source (a kernel's reward function), by the name its text box shows
        self.shipped = {
            path: {entry["name"]: entry for entry in _initial(data, path) or () if isinstance(entry, Mapping)}
            for path in FIELDS
            if path not in FORM_CHOICES and free_list(path)
        }
        for path in OWNED:
            remove_value(self.base, path)
        self.spec: RunSpec | None = None
        self.error: str | None = None
        self.job = None
        self.rehearsing = False
        self.fields: dict[str, widgets.ValueWidget] = {}
        look = Look()
        for path, field in FIELDS.items():
            self.fields[path] = make_widget(path, field.label, _initial(data, path), look)
        #: the spec's sentence, shown right below the field it names
        self.field_error = widgets.HTML(layout=widgets.Layout(margin=f"0 0 4px {LABEL_WIDTH}"))
        self.section_boxes = [widgets.VBox() for _ in SECTIONS]
        self.headings = {
            title: widgets.HTML(f"<b>{html.escape(title)}</b>", **look.of(widgets.HTML))
            for title in (*(section.title for section in SECTIONS), "Data")
        }
        self.status = widgets.HTML()
        self.tabs = widgets.Tab(layout=widgets.Layout(width="52%"))
        button = look.of(widgets.Button, widgets.Layout(width="auto"))
        self.launch_button = widgets.Button(description="Launch", button_style="primary", icon="play", **button)
        self.rehearse_button = widgets.Button(
            description="Rehearse here",
            icon="flask",
            **button,
            tooltip="run this launch here first: same launcher, ranks and ZeRO stage, "
            "a tiny model of the same family, a few steps",
        )
        self.stop_button = widgets.Button(description="Stop", icon="stop", disabled=True, **button)
        self.copy_button = widgets.Button(description="Copy as %%finetune cell", icon="copy", **button)
        self.export_button = widgets.Button(description="Export", icon="download", **button)
        self.export_dir = widgets.Text(placeholder="export directory", layout=widgets.Layout(width="30%"))
        self.cell = widgets.Textarea(layout=widgets.Layout(display="none", width="100%", height="12em"))
        self.output = widgets.Output()
        self.rehearsal_view = widgets.HTML(layout=widgets.Layout(width="100%"))
        self.data_button = widgets.Button(description="Preview data", icon="table", **button)
        self.data_view = widgets.HTML(layout=widgets.Layout(width="100%"))
        self.data_button.on_click(lambda _: self.preview_data())
        self.launch_button.on_click(lambda _: self.launch())
        self.rehearse_button.on_click(lambda _: self.rehearse())
        self.stop_button.on_click(lambda _: self.stop())
        self.copy_button.on_click(lambda _: self.copy_cell())
        self.export_button.on_click(lambda _: self.export())
        super().__init__(
            [
                widgets.HBox([widgets.VBox(self.section_boxes, layout=widgets.Layout(width="48%")), self.tabs]),
                widgets.VBox(
                    [self.headings["Data"], widgets.HBox([self.data_button]), self.data_view],
                    _dom_classes=("nbtoolkit-data-section",),
                ),
                self.status,
                widgets.HBox(
                    [
                        self.launch_button,
                        self.rehearse_button,
                        self.stop_button,
                        self.copy_button,
                        self.export_button,
                        self.export_dir,
                    ]
                ),
                self.rehearsal_view,
                self.cell,
                self.output,
            ]
        )
        self.add_class("nbtoolkit-form")
        self.refresh()
        self.fields["hardware.instance_type"].observe(self._follow_instance, names="value")
        for widget in self.fields.values():
            widget.observe(self.refresh, names="value")

    def _follow_instance(self, change: dict[str, Any]) -> None:
        """A chosen instance type brings its accelerator and devices, by the spec's own rule."""
        try:
            hardware = HardwareSpec(target=self.fields["hardware.target"].value, instance_type=change["new"] or None)
        except ValidationError:
            return
        if hardware.instance_type:
            self.fields["hardware.accelerator"].value = hardware.accelerator
            self.fields["hardware.devices"].value = hardware.devices

    # -- widgets -> spec ---------------------------------------------------------------------------

    def values(self) -> dict[str, Any]:
        return {path: widget.value for path, widget in self.fields.items()}

    def applies(self, path: str, values: Values) -> bool:
        section = next(section for section in SECTIONS if FIELDS[path] in section.fields)
        return section.applies(values) and FIELDS[path].applies(values)

    def spec_data(self) -> dict[str, Any]:
        """The spec dict the visible fields describe, on top of what the prefilled spec had besides."""
        values = self.values()
        data = copy.deepcopy(self.base)
        for path, value in values.items():
            if path in FORM_CHOICES or not self.applies(path, values):
                continue
            value = self._spec_value(path, value)
            if value not in ("", None, []):
                set_value(data, path, value)
        if values[ADAPTER] == "none":
            remove_value(data, "adapter")
        else:
            set_value(data, "adapter.type", values[ADAPTER])
        return data

    def _spec_value(self, path: str, value: Any) -> Any:
        """A widget's value as the spec takes it: a list field's text split into entries (spec_fields.list_entries)."""
        if free_list(path):
            return [self.shipped[path].get(entry, entry) for entry in list_entries(path, value)]
        return value.strip() if isinstance(value, str) else list(value) if isinstance(value, tuple) else value

    def refresh(self, change: Any = None) -> None:
        """Show the fields that apply, validate, and redraw the previews."""
        values = self.values()
        visible = [path for path in FIELDS if self.applies(path, values)]
        data = self.spec_data()
        try:
            self.spec, self.error = quiet_load(data), None
        except SpecError as exc:
            self.spec, self.error = None, str(exc)
        named = named_fields(self.error, visible) if self.error else []
        self._show_fields(values, visible, named)
        self._show_status(named)
        self._show_previews(data)
        self.launch_button.disabled = self.spec is None
        self.rehearse_button.disabled = self.spec is None or self.rehearsing
        self.copy_button.disabled = self.export_button.disabled = self.spec is None

    def _show_fields(self, values: Values, visible: list[str], named: list[str]) -> None:
        """Each section lists the fields that apply, the spec's sentence below the one it names."""
        for section, box in zip(SECTIONS, self.section_boxes, strict=False):
            rows: list[widgets.Widget] = []
            for field in section.fields:
                if field.path in visible:
                    rows.append(self.fields[field.path])
                    if named and field.path == named[0]:
                        rows.append(self.field_error)
            children = (self.headings[section.title], *rows) if rows and section.applies(values) else ()
            if box.children != children:
                box.children = children
        self.field_error.value = f"<span style='color: {ERROR_COLOR}'>{html.escape(self.error)}</span>" if named else ""

    def _show_status(self, named: list[str]) -> None:
        if self.error is None:
            self._say(f"valid spec: {self.spec.display_name}")
        elif named:
            self._say(f"fix {FIELDS[named[0]].label}: {self.error}", error=True)
        else:
            self._say(self.error, error=True)

    def _show_previews(self, data: dict[str, Any]) -> None:
        if self.spec is not None:
            sections = preview(self.spec).sections()
        else:
            problem = f"<p style='color: {ERROR_COLOR}'>{html.escape(self.error)}</p>"
            sections = {
                "Spec (YAML)": problem + pre(yaml.safe_dump(data, sort_keys=False)),
                "Command": problem,
                "Files": problem,
                "Checks": problem,
            }
        if len(self.tabs.children) != len(sections):
            look = {"layout": self.status.layout, "style": self.status.style}
            self.tabs.children = [widgets.HTML(**look) for _ in sections]
            self.tabs.titles = tuple(sections)
        for tab, body in zip(self.tabs.children, sections.values(), strict=False):
            tab.value = body

    def _say(self, text: str, error: bool = False) -> None:
        color = ERROR_COLOR if error else "var(--jp-success-color1, #388e3c)"
        self.status.value = f"<span style='color: {color}'>{html.escape(text)}</span>"

    # -- buttons -----------------------------------------------------------------------------------

    @property
    def cell_text(self) -> str:
        """This spec as a `%%finetune` cell."""
        if self.spec is None:
            raise SpecError(self.error or "the form holds no valid spec")
        return "%%finetune\n" + self.spec.to_yaml()

    def launch(self):
        """Start the spec as a job, then show its live chart below the form."""
        from nbtoolkit.api import launch

        if self.spec is None:
            return None
        try:
            self.job = launch(self.spec)
        except (SpecError, LaunchError) as exc:
            self._say(str(exc), error=True)
            return None
        self.stop_button.disabled = False
        self._say(
            f"job {self.job.id} started ({self.job.record.backend}); nbtoolkit.Job('{self.job.id}') is its handle"
        )
        self._show_chart()
        return self.job

    def rehearse(self) -> threading.Thread | None:
        """Rehearse this spec here (`nbtoolkit rehearse`) while the kernel stays free; the report appears below."""
        if self.spec is None or self.rehearsing:
            return None
        self.rehearsing, self.rehearse_button.disabled = True, True
        self.rehearsal_view.value = (
            "<p><i>rehearsing the launch here with a tiny model of the same family, "
            "a few steps (a minute or more) ...</i></p>"
        )
        thread = threading.Thread(
            target=self._rehearse, args=(self.spec,), daemon=True, name="nbtoolkit-form rehearsal"
        )
        thread.start()
        return thread

    def _rehearse(self, spec: RunSpec) -> None:
        from nbtoolkit.rehearsal.rehearse import rehearse

        try:
            report = rehearse(spec)
        except Exception as exc:
            self.rehearsal_view.value = f"<p style='color: {ERROR_COLOR}'>{html.escape(str(exc))}</p>"
        else:
            color = "inherit" if report.passed else ERROR_COLOR
            self.rehearsal_view.value = (
                f"<pre style='color: {color}; white-space: pre-wrap'>{html.escape(str(report))}</pre>"
            )
        finally:
            self.rehearsing = False
            self.rehearse_button.disabled = self.spec is None

    def preview_data(self):
        """Read a sample of the spec's training data and show its report (rows, columns, labels, token lengths)."""
        from nbtoolkit.inputs.data_preview import preview_data
        from nbtoolkit.notebook.data_view import data_html
        from nbtoolkit.train.errors import TrainError

        if self.spec is None:
            self.data_view.value = f"<p style='color: {ERROR_COLOR}'>{html.escape(self.error or '')}</p>"
            return None
        self.data_button.disabled = True
        self.data_view.value = "<p><i>reading a sample of the training data ...</i></p>"
        try:
            report = preview_data(self.spec)
        except (SpecError, TrainError) as exc:
            self.data_view.value = f"<p style='color: {ERROR_COLOR}'>{html.escape(str(exc))}</p>"
            return None
        finally:
            self.data_button.disabled = False
        self.data_view.value = data_html(report)
        return report

    def _show_chart(self) -> None:
        """The job's live chart below the form.

        A chart redraws one display in place (by display id), and widget Output areas ignore
        such updates (ipywidgets #1844), so the form re-shows each new frame itself.
        """
        self.output.clear_output()
        with self.output:
            chart = self.job.chart()
        threading.Thread(target=self._mirror, args=(chart,), daemon=True, name=f"nbtoolkit-form {self.job.id}").start()

    def _mirror(self, chart, poll: float = 0.5) -> None:
        shown = None
        while True:
            done = not chart.running
            if chart.bundle and chart.bundle is not shown:  # each update is a new bundle
                shown = chart.bundle
                self.output.outputs = ({"output_type": "display_data", "metadata": {}, "data": shown},)
            if done:
                return
            time.sleep(poll)

    def stop(self) -> None:
        if self.job is not None:
            self._say(f"job {self.job.id} {self.job.stop()}")

    def copy_cell(self) -> str:
        """Offer the spec as a `%%finetune` cell: shown to copy, and inserted as a new cell.

        A widget click is not a cell execution, so Jupyter inserts the cell when the next cell runs.
        """
        from IPython import get_ipython

        text = self.cell_text
        self.cell.value = text
        self.cell.layout.display = ""
        shell = get_ipython()
        if shell is not None:
            shell.set_next_input(text)
        self._say("the %%finetune cell is below; it is also inserted after the next cell you run")
        return text

    def export(self) -> Path | None:
        """Write run.sh, launch.json and the launch's files, to run this spec outside Jupyter."""
        from nbtoolkit.backends import dispatch
        from nbtoolkit.runner import write_launch_files

        if self.spec is None:
            return None
        directory = Path(self.export_dir.value.strip() or f"nbtoolkit-export-{self.spec.display_name}")
        try:
            written = write_launch_files(dispatch.render(chains.in_default_store(self.spec).spec), directory)
        except LaunchError as exc:
            self._say(str(exc), error=True)
            return None
        self._say(f"wrote {', '.join(path.name for path in written)} to {directory}/; run {directory / 'run.sh'}")
        return directory
