"""A report as one self-contained HTML page: viewable offline, sent as one file.

Everything is inline: the style sheet, each figure as a base64 PNG (``data:`` URI), no
script, no font, no external resource. The only addresses in the page are the links
(``<a href>``) that open a sweep's runs in the MLflow UI (:func:`analysis.mlflow_ui.run_url`):
the one given (``--ui``), else the tracking server's own, else ``ortho ui``'s,
:data:`analysis.mlflow_ui.DEFAULT_UI` (:func:`analysis.mlflow_ui.ui_for`).

A page is built from sections so that a paper's page can gather several specs:
:func:`render_section` turns one :class:`~analysis.report.Report` into a ``<section>``
(verdicts, tables with the published values beside the measured ones, figures, provenance),
and :func:`render_page` wraps sections in a document. ``ortho report SPEC --format html``
writes a page of one section (:func:`write_html`).
"""

from __future__ import annotations

import base64
import io
import numbers
import re
import shlex
from collections.abc import Mapping, Sequence
from html import escape
from pathlib import Path

import pandas as pd

from analysis.claims import Claim
from analysis.figures import Figure
from analysis.load import SweepRuns
from analysis.mlflow_ui import DEFAULT_UI, run_url, ui_for
from analysis.report import Report, search
from analysis.tables import Cell, Table
from sweeps.contract import redact, sqlite_path

FIGURE_DPI = 110
"""Resolution of the embedded PNGs (a page of many figures stays a few MB)."""

_NOT_NAMED = ("seed", "data_seed", "device")
"""Params left out of a run's label (they tell seeds apart, not configurations)."""

STYLE = """
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:2em auto;max-width:75em;
 padding:0 1em;color:#1d1d1f;line-height:1.4}
h1{font-size:1.6em}h2{border-bottom:2px solid #ccc;padding-bottom:.2em;margin-top:2em}
h3{font-size:1.05em;margin-bottom:.3em}
table{border-collapse:collapse;margin:.5em 0;font-size:.9em;display:block;overflow-x:auto;
 max-width:100%}
th,td{border:1px solid #ccc;padding:.2em .5em;text-align:left;vertical-align:top}
th{background:#f2f2f2}td.num{text-align:right;font-variant-numeric:tabular-nums;
 white-space:nowrap}
td.paper,th.paper{background:#eef3fb}td.partial{background:#fff6dd}
td.missing{color:#a33}td.outside{color:#888;font-style:italic}
ul.verdicts{list-style:none;padding-left:0}ul.verdicts li{margin:.3em 0;padding:.3em .6em;
 border-left:.4em solid #999}
li.holds{border-color:#2a8a3e!important;background:#eef8f0}
li.fails{border-color:#b3261e!important;background:#fcefee}
li.not-measured{border-color:#999!important;background:#f4f4f4}
.caveat{font-size:.9em;color:#444;margin-top:.2em}
.status{font-weight:600}.prov{font-size:.9em;color:#444}.notes{font-size:.85em;color:#444}
figure{margin:1em 0}figure img{max-width:100%;border:1px solid #ddd}
figcaption{font-size:.85em;color:#444}dl.prov{display:grid;
 grid-template-columns:max-content minmax(0,1fr);gap:.1em 1em}dl.prov dt{font-weight:600}
dl.prov dd{margin:0;overflow-wrap:anywhere}
"""


_CODE = re.compile(r"`([^`]+)`")
"""A command or name in backticks, as the reports' notes and caveats write them for the
terminal and Markdown."""


def prose(text: str) -> str:
    """``text`` escaped for HTML, with each backticked span set as ``<code>`` (the notes,
    caveats and provenance are written once, for Markdown and the page alike)."""
    return _CODE.sub(r"<code>\1</code>", escape(text))


def _cell_class(cell: Cell, numeric: bool, paper: bool) -> str:
    classes = ["num"] if numeric else []
    if paper:
        classes.append("paper")
    if cell.partial:
        classes.append("missing" if cell.value is None else "partial")
    elif cell.outside:
        classes.append("outside")
    return " ".join(classes)


def table_html(table: Table) -> str:
    """One table: caption, provenance line, header, cells (published columns shaded,
    partial, missing and not-in-profile cells marked), legend and notes."""
    paper = ["paper" in c for c in table.columns]
    numeric = table.numeric_columns()
    head = "".join(f'<th class="paper">{escape(c)}</th>' if p else f"<th>{escape(c)}</th>"
                   for c, p in zip(table.columns, paper, strict=True))
    body = []
    for row in table.rows:
        cells = []
        for cell, num, pub in zip(row, numeric, paper, strict=True):
            cls = _cell_class(cell, num, pub)
            attr = f' class="{cls}"' if cls else ""
            cells.append(f"<td{attr}>{escape(cell.marked())}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    notes = "".join(f"<li>{prose(n)}</li>" for n in table.notes)
    return (f'<div class="table" id="table-{escape(table.name)}">'
            f"<h3>{escape(table.title)}</h3>"
            f'<p class="prov">{escape(table.provenance.line())}</p>'
            f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
            f'<p class="notes">{prose(table.legend())}</p>'
            f'<ul class="notes">{notes}</ul></div>')


def figure_png(figure: Figure) -> bytes:
    """The figure drawn as PNG bytes at :data:`FIGURE_DPI`."""
    buf = io.BytesIO()
    figure.render().savefig(buf, format="png", dpi=FIGURE_DPI)
    return buf.getvalue()


def figure_html(figure: Figure) -> str:
    """One figure as an embedded PNG with its title and notes as the caption; a figure with
    nothing to plot as its caption alone."""
    notes = "".join(f"<br>{prose(n)}" for n in figure.shown_notes)
    caption = f"<figcaption>{escape(figure.title)}{notes}</figcaption></figure>"
    if figure.empty:
        return f'<figure id="figure-{escape(figure.name)}" class="empty">{caption}'
    data = base64.b64encode(figure_png(figure)).decode("ascii")
    return (f'<figure id="figure-{escape(figure.name)}">'
            f'<img alt="{escape(figure.title)}" src="data:image/png;base64,{data}">{caption}')


_STATUS_CLASS = {"holds": "holds", "does not hold": "fails", "not measured": "not-measured"}


def claims_html(claims: Sequence[Claim]) -> str:
    """The verdict lines, one list item per claim, coloured by status."""
    if not claims:
        return ""
    items = []
    for c in claims:
        partial = " (partial sweep)" if c.partial and c.status != "not measured" else ""
        why = f'<div class="caveat">Why: {prose(c.caveat)}</div>' if c.caveat else ""
        items.append(f'<li class="{_STATUS_CLASS[c.status]}">'
                     f'<span class="status">{escape(c.source)} · {escape(c.status)}'
                     f"{partial}</span> — {prose(c.text)}: {prose(c.evidence)}{why}</li>")
    return '<h3>Verdicts</h3><ul class="verdicts">' + "".join(items) + "</ul>"


def _duration(seconds: float) -> str:
    if seconds < 59.95:
        return f"{max(0.0, seconds):.1f} s"
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours} h {minutes:02d} min" if hours else f"{minutes} min {secs:02d} s"


def provenance_items(runs: SweepRuns) -> dict[str, str]:
    """What a reader needs to trust or redo the numbers: label -> text (profile, sweep, spec
    and code hashes, wall time, machines, counts)."""
    sweep, frame = runs.sweep, runs.runs
    start = pd.to_numeric(frame["start_time"], errors="coerce").dropna()
    end = pd.to_numeric(frame["end_time"], errors="coerce").dropna()
    wall = "no configuration ended" if start.empty or end.empty else (
        f"{_duration((end.max() - start.min()) / 1000)} from the first configuration's start "
        f"to the last one's end; {_duration(float((end - start.loc[end.index]).sum()) / 1000)}"
        " of training summed over configurations")
    if sweep.per_hour is not None:
        rate = f"{sweep.per_hour:,.0f}" if sweep.per_hour >= 10 else f"{sweep.per_hour:.2g}"
        wall += f"; {rate} configurations finished per hour by the command that ran it" + (
            f" last ({_duration(sweep.run_seconds)})" if sweep.run_seconds is not None else "")
    hosts = frame["hostname"].dropna() if "hostname" in frame else pd.Series(dtype=object)
    machines = ", ".join(f"{h} ({_count(n, 'configuration')})"
                         for h, n in hosts.value_counts().sort_index().items()) or "not tagged"
    outcomes = ", ".join(f"{n} {k}" for k, n in runs.outcomes.items() if n) or "none"
    how = (f"{search(runs)}; its studies are in {sweep.optuna_storage} (listed by `ortho sweep "
           f"studies {sweep.sweep_id}`)") if sweep.optuna_storage else "grid"
    return {"spec": sweep.spec, "profile": sweep.profile, "sweep id": sweep.sweep_id,
            "search": how,
            "spec sha256": sweep.spec_sha256 or "not tagged",
            "git sha": (sweep.git_sha or "not tagged")
            + (" with uncommitted changes" if sweep.git_dirty else ""),
            "wall time": wall, "machines": machines,
            "runs": f"{_count(runs.n_runs, 'MLflow run')} → "
                    f"{_count(len(frame), 'configuration')} ({outcomes})"
            + (f"; {sweep.repeats} repeated Optuna point{'' if sweep.repeats == 1 else 's'}, "
               "told a known value, not trained" if sweep.repeats else ""),
            "store": redact(runs.tracking_uri) if runs.tracking_uri else "unknown"}


def _count(n: int, noun: str) -> str:
    """``1 configuration``, ``2 configurations``."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _label(row: pd.Series, keys: Sequence[str]) -> str:
    parts = []
    for key in keys:
        value = row.get(f"params.{key}")
        if value is not None and value == value:
            text = format(value, "g") if isinstance(value, numbers.Real) and not isinstance(
                value, bool) else str(value)
            parts.append(f"{key}={text}")
    return " ".join(parts)


def _name(row: pd.Series, keys: Sequence[str]) -> str:
    name = row.get("run_name")
    return name if isinstance(name, str) and name else _label(row, keys)


_NUMBER = re.compile(r"(\d+(?:\.\d+)?(?:e[-+]?\d+)?)")
"""A number in a run's label (``0.01``, ``1e-05``, ``120``), split out to order by value."""


def _natural(label: str) -> list[str | float]:
    """``label`` as text and numbers alternately, so that labels sort as a reader counts:
    ``T=20`` before ``T=100``, ``α=1e-05`` before ``α=0.0001``."""
    return [float(part) if i % 2 else part for i, part in enumerate(_NUMBER.split(label))]


def _ui_command(tracking_uri: str | None) -> str:
    """The ``ortho ui`` that serves the runs of ``tracking_uri`` (a home's ``mlflow.db`` by
    its home, any other store by its URI, masked), whatever folder the reader is in."""
    path = sqlite_path(tracking_uri or "")
    if path is not None and path.name == "mlflow.db":
        return f"ortho ui --home {shlex.quote(str(path.parent))}"
    return f"ortho ui --tracking-uri {shlex.quote(redact(tracking_uri))}" if tracking_uri \
        else "ortho ui"


def runs_html(runs: SweepRuns, ui: str | None = None) -> str:
    """Links that open the sweep's parent run and each configuration's run in the MLflow UI
    at ``ui`` (default: :func:`~analysis.mlflow_ui.ui_for` the store, ``ortho ui``'s address),
    each labelled with its run name (what varies where it varies: ``OPEN α=0.01 λ=1``,
    :mod:`sweeps.naming`), or the params that vary within the sweep for a run read without
    its name (a report cache written before names were read), and its outcome; listed by
    label, numbers by value (:func:`_natural`), so that a configuration is found where a
    reader looks for it rather than in the order MLflow returned the runs."""
    sweep, frame = runs.sweep, runs.runs
    keys = [c.removeprefix("params.") for c in frame.columns if c.startswith("params.")
            and c.removeprefix("params.") not in _NOT_NAMED
            and frame[c].astype(str).nunique() > 1]
    base = ui or ui_for(runs.tracking_uri)
    listed = sorted(((_name(r, keys), str(r["run_id"]), str(r["outcome"]))
                     for _, r in frame.iterrows()), key=lambda e: (_natural(e[0]), e[1]))
    rows = "".join(
        f'<tr><td><a href="{escape(run_url(sweep.experiment_id, run_id, base))}">'
        f'{escape(run_id[:12])}</a></td><td>{escape(name)}</td>'
        f'<td>{escape(outcome)}</td></tr>' for name, run_id, outcome in listed)
    parent = escape(run_url(sweep.experiment_id, sweep.parent_run_id, base))
    where = (f"<code>{escape(_ui_command(runs.tracking_uri))}</code>" if base == DEFAULT_UI
             else f"the MLflow UI at <code>{escape(base)}</code>")
    return (f'<p class="prov">Open in {where}: <a href="{parent}">the sweep\'s '
            f"parent run</a>; its configurations:</p><details><summary>"
            f"{_count(len(frame), 'configuration run')}</summary><table><thead><tr>"
            "<th>run</th><th>configuration</th><th>outcome</th></tr></thead>"
            f"<tbody>{rows}</tbody></table></details>")


def provenance_html(runs: SweepRuns, ui: str | None = None) -> str:
    """The provenance block of a section: :func:`provenance_items` and :func:`runs_html`
    (its links to the UI at ``ui``)."""
    items = "".join(f"<dt>{escape(k)}</dt><dd>{prose(v)}</dd>"
                    for k, v in provenance_items(runs).items())
    return f'<h3>Provenance</h3><dl class="prov">{items}</dl>' + runs_html(runs, ui)


def render_section(report: Report, ui: str | None = None) -> str:
    """One spec's ``<section>``: verdicts, tables, figures, provenance (its links to the
    MLflow UI at ``ui``, default :func:`~analysis.mlflow_ui.ui_for` the store)."""
    spec = report.runs.sweep.spec
    parts = [f'<section id="{escape(spec)}"><h2>{escape(spec)}</h2>',
             claims_html(report.claims), *(table_html(t) for t in report.tables),
             *(figure_html(f) for f in report.figures), provenance_html(report.runs, ui),
             "</section>"]
    return "\n".join(p for p in parts if p)


def render_page(title: str, sections: Sequence[str],
                provenance: Mapping[str, str] | None = None) -> str:
    """A whole HTML document: ``title``, an optional page-level provenance (label -> text,
    e.g. the paper, the profile, when it was built) and the ``sections``."""
    prov = "" if not provenance else '<dl class="prov">' + "".join(
        f"<dt>{escape(k)}</dt><dd>{prose(v)}</dd>" for k, v in provenance.items()) + "</dl>"
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{escape(title)}</title><style>{STYLE}</style></head><body>"
            f"<h1>{escape(title)}</h1>{prov}\n" + "\n".join(sections) + "\n</body></html>\n")


def write_html(report: Report, out_dir: str | Path, ui: str | None = None) -> Path:
    """Write the report as ``<out_dir>/<spec>.html`` (a page of one section, its run links to
    the MLflow UI at ``ui``); returns the path."""
    sweep = report.runs.sweep
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{sweep.spec}.html"
    title = f"{sweep.spec} — profile {sweep.profile}, sweep {sweep.sweep_id}"
    path.write_text(render_page(title, [render_section(report, ui)]), encoding="utf-8")
    return path
