"""One self-contained HTML report per sweep: tables and plots (base64 PNG) in a single file.

It needs no network, no script and no external stylesheet, so it opens offline and can be sent to a
colleague as is. Every piece of text is HTML-escaped: system names and questions come from users' data.
"""

from __future__ import annotations

import base64
import io
import numbers
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from html import escape
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from pipeline.analysis.diagnosis import CLASSES, LABELS
from pipeline.reports.plots import HEATMAP_MAX_ROWS, rank_buckets

DPI = 110
_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 70em; color: #222; line-height: 1.4; }
h1 { font-size: 1.6em; } h2 { font-size: 1.25em; margin-top: 2em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; margin: 0.8em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; vertical-align: top; }
th { background: #f2f2f2; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
img { max-width: 100%; height: auto; border: 1px solid #eee; } pre { background: #f7f7f7; padding: 0.8em; }
figure { margin: 1em 0; } figcaption { font-size: 0.9em; color: #555; }
"""


@dataclass(frozen=True)
class Section:
    """One part of a report: a heading with optional text, table, figure and preformatted block."""

    heading: str
    text: str = ""
    table: pd.DataFrame | None = None
    figure: Figure | None = None
    preformatted: str = ""


def figure_png(fig: Figure, dpi: int = DPI) -> bytes:
    """The figure rendered as PNG bytes."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi)
    return buffer.getvalue()


def figure_filename(name: str) -> str:
    """A safe file name for a figure: anything outside ``[A-Za-z0-9._-]`` becomes ``_``."""
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._") or "figure"
    return stem if stem.endswith(".png") else stem + ".png"


def save_figures(figures: Mapping[str, Figure], directory: str | Path, dpi: int = DPI) -> list[Path]:
    """Write each figure as ``<directory>/<name>.png`` (directory created); returns the paths in order."""
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, fig in figures.items():
        path = folder / figure_filename(name)
        path.write_bytes(figure_png(fig, dpi))
        paths.append(path)
    return paths


def render_html(title: str, sections: Sequence[Section], meta: Mapping[str, str] | None = None) -> str:
    """The whole page as one string; ``meta`` (collection, digests, config ...) is shown under the title."""
    parts = ["<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
             f"<title>{escape(title)}</title>", f"<style>{_STYLE}</style>", "</head>", "<body>",
             f"<h1>{escape(title)}</h1>"]
    if meta:
        parts.append(_table(pd.DataFrame({"value": [str(v) for v in meta.values()]},
                                         index=pd.Index([str(k) for k in meta], name="")), index=True))
    for section in sections:
        parts.append(f"<section><h2>{escape(section.heading)}</h2>")
        for paragraph in filter(None, (p.strip() for p in section.text.split("\n\n"))):
            parts.append(f"<p>{escape(paragraph)}</p>")
        if section.table is not None:
            parts.append(_table(section.table, index=True))
        if section.preformatted:
            parts.append(f"<pre>{escape(section.preformatted)}</pre>")
        if section.figure is not None:
            data = base64.b64encode(figure_png(section.figure)).decode("ascii")
            caption = section.figure.axes[0].get_title() if section.figure.axes else section.heading
            parts.append(f'<figure><img src="data:image/png;base64,{data}" alt="{escape(caption)}">'
                         f"<figcaption>{escape(caption)}</figcaption></figure>")
        parts.append("</section>")
    parts += ["</body>", "</html>"]
    return "\n".join(parts)


def sweep_html(
    title: str,
    summary: pd.DataFrame,
    ranks: pd.DataFrame | None = None,
    diagnoses: Mapping[str, pd.DataFrame] | None = None,
    figures: Mapping[str, Figure] | None = None,
    meta: Mapping[str, str] | None = None,
    cutoff: int = 3,
    late_limit: int = 10,
) -> str:
    """The sweep's report: every system, its means with intervals, ranks, failure classes, and the plots.

    ``summary`` is long (``system, metric, mean, ci_low, ci_high``); ``ranks`` questions x systems, the
    first relevant rank (0 = not retrieved); ``diagnoses`` maps a system to its pipeline.analysis.diagnosis table.
    """
    diagnoses = diagnoses or {}
    systems = list(dict.fromkeys([*summary["system"], *(ranks.columns if ranks is not None else []), *diagnoses]))
    sections = [Section("Systems", f"{len(systems)} system(s) in this sweep: " + ", ".join(map(str, systems)) + ".")]
    sections.append(Section("Metric means with 95% bootstrap intervals",
                            "Each cell: mean over the questions [interval low, high].", means_table(summary)))
    for name, fig in (figures or {}).items():
        sections.append(Section(name, figure=fig))
    if ranks is not None:
        if len(ranks) <= HEATMAP_MAX_ROWS * 4:
            shown = ranks.apply(lambda col: col.map(lambda r: str(int(r)) if pd.notna(r) and r > 0 else "--"))
            sections.append(Section("Rank of the first relevant document", "-- = not retrieved.", shown))
        else:
            sections.append(Section("Rank of the first relevant document",
                                    f"Questions per rank bucket ({len(ranks)} questions).",
                                    rank_buckets(ranks, cutoff, late_limit)))
    if diagnoses:
        counts = pd.DataFrame({s: {LABELS[c]: int(t[c].sum()) for c in CLASSES} for s, t in diagnoses.items()}).T
        counts.index.name = "system"
        sections.append(Section("Failure classes", f"Questions per class (first relevant not in the top {cutoff}, "
                                "or near-duplicates crowding the top).", counts))
        for system, table in diagnoses.items():
            failing = table[table["missed"] | table[list(CLASSES)].any(axis=1)]
            shown = failing[["question", "rank", "first_result", "diagnosis", "evidence"]]
            sections.append(Section(f"Diagnosis: {system}", f"{len(failing)} of {len(table)} questions.",
                                    shown if len(failing) else None))
    return render_html(title, sections, meta)


def means_table(summary: pd.DataFrame) -> pd.DataFrame:
    """Systems x metrics, each cell ``mean [low, high]`` to three decimals."""
    cells = summary.assign(cell=[f"{m:.3f} [{lo:.3f}, {hi:.3f}]" for m, lo, hi in
                                 zip(summary["mean"], summary["ci_low"], summary["ci_high"])])
    table = cells.pivot(index="system", columns="metric", values="cell")
    table = table.reindex(index=list(dict.fromkeys(summary["system"])), columns=list(dict.fromkeys(summary["metric"])))
    return table.fillna("")


def write_report(html: str, path: str | Path) -> Path:
    """Write the report (UTF-8), creating its folder."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(html, encoding="utf-8")
    return target


def _table(frame: pd.DataFrame, index: bool = True) -> str:
    """An escaped HTML table; numbers are right-aligned."""
    head = ([escape(str(frame.index.name or ""))] if index else []) + [escape(str(c)) for c in frame.columns]
    rows = ["<table>", "<thead><tr>" + "".join(f"<th>{h}</th>" for h in head) + "</tr></thead>", "<tbody>"]
    for key, row in frame.iterrows():
        cells = [f"<th>{escape(str(key))}</th>"] if index else []
        for value in row:
            numeric = isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))
            text = f"{value:.3f}" if isinstance(value, float) else _text(value)
            cells.append(f'<td class="num">{escape(text)}</td>' if numeric else f"<td>{escape(text)}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    rows += ["</tbody>", "</table>"]
    return "\n".join(rows)


def _text(value: object) -> str:
    if isinstance(value, dict):
        return "; ".join(f"{k}: {_text(v)}" for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return ", ".join(_text(v) for v in value)
    return str(value)
