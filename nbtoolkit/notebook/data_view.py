"""A DataPreview as HTML: the form's Data section and a notebook's display of `preview_data(spec)`.

Plain HTML (a table and CSS bars), so the report needs no plotting library and no image round trip.
"""

from __future__ import annotations

import html
from collections.abc import Callable

from nbtoolkit.inputs.data_preview import DataPreview, TokenLengths, clip

CELL_CHARS = 120
BAR_COLOR = "var(--jp-brand-color1, #1976d2)"
MARK_COLOR = "var(--jp-error-color1, #d32f2f)"


def data_html(report: DataPreview) -> str:
    used = ", ".join(
        f"<code>dataset.{field}</code> &rarr; <code>{html.escape(name)}</code> &#10003;"
        for field, name in report.used.items()
    ) or html.escape(", ".join(report.format_columns))
    parts = [
        f"<p><b>{report.sample_size}</b> {html.escape(report.task)} examples from {html.escape(report.origin)}</p>",
        f"<p>columns found: {html.escape(', '.join(report.columns))}<br>columns used: {used}</p>",
        rows_table(report),
        *([rendered_html(report)] if report.data_format else []),
    ]
    if report.label_counts is not None:
        parts.append("<h5>Labels</h5>" + bars([(label, count, False) for label, count in report.label_counts.items()]))
    parts.append(
        "<div style='display: flex; flex-wrap: wrap; gap: 0 32px'>"
        + "".join(histogram(side, report.model) for side in report.lengths)
        + "</div>"
    )
    if report.note:
        parts.append(f"<p><i>{html.escape(report.note)}</i></p>")
    if report.warning:
        parts.append(f"<p style='color: #b45309'><b>Warning:</b> {html.escape(report.warning)}</p>")
    return f"<div class='nbtoolkit-data'>{''.join(parts)}</div>"


def rendered_html(report: DataPreview) -> str:
    """Chat data: the detected format, and the first rows as trained, the tokens that carry loss highlighted, each
    row's images (a vision-language task's) beside its text."""
    examples = "".join(map(example_html, report.rendered))
    return (
        f"<p>format: <b>{html.escape(report.data_format or '')}</b>; as trained through the chat template, "
        f"<mark>highlighted</mark> tokens carry the loss:</p>{examples}"
    )


def example_html(example) -> str:
    """One row as trained, its images (a vision-language task's) to the left of its text."""
    text = (
        "<pre style='white-space: pre-wrap; font-size: 85%'>"
        + "".join(
            f"<mark title='carries loss'>{html.escape(text)}</mark>" if loss else html.escape(text)
            for text, loss in example.pieces
        )
        + "</pre>"
    )
    if not example.images:
        return text
    images = "".join(
        f"<img src='data:image/png;base64,{image}' alt='image {number}' style='flex: none; margin-top: 1em'>"
        for number, image in enumerate(example.images, 1)
    )
    return f"<div style='display: flex; gap: 12px; align-items: flex-start'>{images}{text}</div>"


def rows_table(report: DataPreview) -> str:
    head = "".join(f"<th>{html.escape(name)}</th>" for name in report.columns)
    body = "".join(
        "<tr>"
        + "".join(f"<td>{html.escape(clip(str(row.get(name)), CELL_CHARS))}</td>" for name in report.columns)
        + "</tr>"
        for row in report.rows
    )
    return (
        f"<table class='nbtoolkit-data-rows' style='font-size: 85%'><thead><tr>{head}</tr></thead>"
        f"<tbody>{body}</tbody></table>"
    )


def histogram(side: TokenLengths, model: str) -> str:
    """One bar per length bin; the bin the spec cuts in is red, with the cut share and the suggestion below."""
    quantiles = ", ".join(f"{name} {value}" for name, value in side.quantiles().items())
    rows = [
        (f"{low}-{high - 1}", count, side.cut_at is not None and low <= side.cut_at < high)
        for low, high, count in side.histogram()
    ]
    lines = []
    if side.cut_share is not None:
        lines.append(f"<code>{side.field}</code> {side.cut_at}: <b>{side.cut_share:.1%}</b> of examples are longer")
    if side.suggested is not None:
        lines.append(f"suggested <code>{side.field}</code>: <b>{side.suggested}</b>")
    return (
        f"<div class='nbtoolkit-data-histogram' data-side='{side.side}'>"
        f"<h5>{side.side.capitalize()} tokens ({html.escape(model)}'s tokenizer): {quantiles}</h5>"
        f"{bars(rows)}<p>{'<br>'.join(lines)}</p></div>"
    )


def bars(
    rows: list[tuple[str, float, bool]],
    shown: Callable[[float], str] = str,
    mark: str = " &larr; cut",
    mark_color: str = MARK_COLOR,
) -> str:
    """A horizontal bar chart: (label, value, marked) per row, bars scaled to the largest value; a marked row
    is in `mark_color`, with `mark` after its value."""
    top = max((value for _, value, _ in rows), default=0) or 1
    cells = "".join(
        f"<tr style='line-height: 1.2'><td style='text-align: right; padding: 0 6px 0 0'>{html.escape(label)}</td>"
        f"<td style='width: 240px; padding: 1px 0'><div class='nbtoolkit-bar'{' data-marked' if marked else ''} "
        f"style='width: {100 * value / top:.0f}%; height: 12px; background: {mark_color if marked else BAR_COLOR}'>"
        f"</div></td><td style='padding: 0 0 0 6px'>{shown(value)}{mark if marked else ''}</td></tr>"
        for label, value, marked in rows
    )
    return f"<table style='font-size: 85%; border-collapse: collapse'>{cells}</table>"
