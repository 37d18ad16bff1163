"""A sweep's summary tables as plain data, and the same tables as HTML, Markdown and LaTeX.

The means table follows ranx's comparison report: each system (a group of identical ones counts once) gets a letter;
each cell is the mean with the letters of the systems it is significantly better than as a superscript (paired
interval excludes zero and Holm-adjusted randomisation p below alpha, :func:`metrics.comparison.all_pairs`); the best
mean of each column is bold. The pairs table gives every paired difference on the primary metric; a grid sweep's
table gives the primary metric over two swept parameters.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from html import escape

import pandas as pd

from pipeline.analysis.summary import SweepSummary, numeric_keys

DIGITS = 3
TIED = "†"  # a grid cell tied with the top one


@dataclass(frozen=True)
class Cell:
    """One cell: its text, an optional interval, superscript letters, bold (the best), a tooltip and a shade
    (0-1, a heat map's intensity; None for none)."""

    text: str
    interval: str = ""
    marks: str = ""
    bold: bool = False
    tip: str = ""
    shade: float | None = None


@dataclass
class Table:
    """A titled table: column headings, rows of cells (the first ``header_columns`` cells head their row)."""

    key: str  # file and anchor stem: 'means', 'pairs', 'grid'
    title: str
    columns: list[str]
    rows: list[list[Cell]]
    caption: str = ""
    header_columns: int = 2
    notes: list[str] = field(default_factory=list)


def letter(i: int) -> str:
    """a, b, ..., z, aa, ab, ...: the ranx-style name of the i-th system."""
    text = ""
    i += 1
    while i:
        i, r = divmod(i - 1, 26)
        text = chr(ord("a") + r) + text
    return text


def letters(summary: SweepSummary) -> dict[str, str]:
    """Each group's representative -> its letter, in table order."""
    return {rep: letter(i) for i, rep in enumerate(summary.representatives)}


def _better_than(summary: SweepSummary, metric: str) -> dict[str, list[str]]:
    """For each representative, the representatives it is significantly better than on ``metric``."""
    out: dict[str, list[str]] = {rep: [] for rep in summary.representatives}
    if summary.pairs.empty:
        return out
    pairs = summary.pairs
    on_metric = (pairs.index.get_level_values("metric") == metric) & pairs["significant"].astype(bool).to_numpy()
    chosen = pairs[on_metric]  # column by column: iterrows built a Series per pair, for every metric
    for (a, b, _), difference in zip(chosen.index, chosen["difference"].tolist()):
        winner, loser = (a, b) if difference > 0 else (b, a)
        out[winner].append(loser)
    return out


def means_table(summary: SweepSummary) -> Table:
    """Systems x shown metrics: mean, interval, the letters of the systems it beats; the best of each column bold."""
    names = [spec.name for spec in summary.show]
    tags = letters(summary)
    best = {m: round(float(summary.means.loc[summary.representatives, m].max()), DIGITS) for m in names}
    beats = {m: _better_than(summary, m) for m in names}
    rows = []
    for rep in summary.representatives:
        cells = [Cell(tags[rep]), Cell(summary.label(rep))]
        for m in names:
            mean = float(summary.means.loc[rep, m])
            low, high = summary.means.loc[rep, f"{m}/ci_low"], summary.means.loc[rep, f"{m}/ci_high"]
            marks = "".join(sorted(tags[x] for x in beats[m][rep]))
            cells.append(Cell(_number(mean), f"[{_number(low)}, {_number(high)}]", marks,
                              bold=round(mean, DIGITS) == best[m]))
        rows.append(cells)
    level = f"{summary.confidence:.0%}"
    caption = (f"Mean over the questions with its {level} bootstrap interval. Superscripts: the letters of the systems "
               f"this one is significantly better than (paired {level} interval excludes zero and randomisation-test "
               f"p, Holm-adjusted over every pair, below {summary.alpha:.2g}). Bold: the best mean of each column.")
    return Table("means", "Systems and their means", ["#", "system", *names], rows, caption)


def pairs_table(summary: SweepSummary) -> Table | None:
    """Row minus column on the primary metric for every pair of systems; significant differences bold and starred,
    each cell's tooltip its interval, Holm-adjusted p and detectable difference."""
    metric = summary.primary.name
    if summary.pairs.empty or metric not in summary.pairs.index.get_level_values("metric"):
        return None
    reps = summary.representatives
    tags = letters(summary)
    table = summary.pairs.xs(metric, level="metric")
    # each pair's row and detectable difference by key, read once: a label look-up per cell was most of the table
    found = {key: row for key, row in zip(table.index, table[["difference", "ci_low", "ci_high", "p_holm",
                                                                "significant"]].itertuples(index=False))}
    mdes = summary.sensitivity["mde"].to_dict() if not summary.sensitivity.empty else {}
    rows = []
    for a in reps:
        cells = [Cell(tags[a]), Cell(summary.label(a))]
        for b in reps:
            if a == b:
                cells.append(Cell(""))
                continue
            key, sign = ((a, b), 1.0) if (a, b) in found else ((b, a), -1.0)
            row = found[key]
            low, high = sorted((sign * row.ci_low, sign * row.ci_high))
            mde = mdes.get(key)
            tip = (f"{summary.label(a)} minus {summary.label(b)}: {sign * row.difference:+.4f} "
                   f"[{low:+.4f}, {high:+.4f}], p (Holm) {row.p_holm:.4f}"
                   + (f", detectable {mde:.3f}" if mde is not None and mde == mde else ""))
            cells.append(Cell(f"{sign * row.difference:+.{DIGITS}f}", marks="*" if row.significant else "",
                              bold=bool(row.significant), tip=tip))
        rows.append(cells)
    caption = (f"{metric}: the row's system minus the column's, mean over the questions. * and bold: significant "
               f"(paired {summary.confidence:.0%} interval excludes zero and Holm-adjusted p below "
               f"{summary.alpha:.2g}). Every pair's interval and p on every shown metric: pairs.csv.")
    return Table("pairs", f"Paired differences on {metric}, every pair", ["#", "system", *(tags[r] for r in reps)],
                 rows, caption)


def grid_axes(summary: SweepSummary) -> tuple[str, str] | None:
    """The two swept numeric params that lay the systems out as a grid (each pair of values one system), the one
    with more values first; None when the sweep is no such grid."""
    keys = numeric_keys(summary.swept)
    if len(keys) < 2:
        return None
    done = summary.finished
    keys = sorted(keys, key=lambda k: (-len(summary.swept[k]), k))
    for i, x in enumerate(keys):
        for y in keys[i + 1:]:
            cells = {(s.params.get(x), s.params.get(y)) for s in done}
            if len(cells) == len(done):
                return x, y
    return None


def grid_frame(summary: SweepSummary, metric: str | None = None) -> pd.DataFrame | None:
    """One row per system of a grid sweep: the two axes' values (numbers), the metric's mean and interval and
    whether the system is tied with (or is) the top one; None when the sweep is not a grid."""
    axes = grid_axes(summary)
    if axes is None:
        return None
    metric = metric or summary.primary.name
    x, y = axes
    top = set(summary.top_group) | set(summary.tied)
    means = summary.means
    rows = [{x: float(s.params[x]), y: float(s.params[y]), "system": s.name, "mean": float(means.loc[s.name, metric]),
             "ci_low": float(means.loc[s.name, f"{metric}/ci_low"]),
             "ci_high": float(means.loc[s.name, f"{metric}/ci_high"]), "top": s.name in top}
            for s in summary.finished]
    return pd.DataFrame(rows).sort_values([x, y]).reset_index(drop=True)


def grid_table(summary: SweepSummary) -> Table | None:
    """The primary metric over a grid: rows one axis, columns the other, each cell shaded by its mean."""
    frame = grid_frame(summary)
    if frame is None:
        return None
    x, y = grid_axes(summary)
    metric = summary.primary.name
    low, high = frame["mean"].min(), frame["mean"].max()
    best = round(high, DIGITS)
    ys = sorted(frame[y].unique())
    rows = []
    for xv, part in frame.groupby(x, sort=True):
        cells = [Cell(_value(xv))]
        by_y = part.set_index(y)
        for yv in ys:
            if yv not in by_y.index:
                cells.append(Cell(""))
                continue
            r = by_y.loc[yv]
            shade = 0.5 if high == low else float((r["mean"] - low) / (high - low))
            top = round(r["mean"], DIGITS) == best
            cells.append(Cell(_number(r["mean"]), f"[{_number(r.ci_low)}, {_number(r.ci_high)}]",
                              TIED if r["top"] and not top else "", bold=top, tip=str(r.system), shade=shade))
        rows.append(cells)
    caption = (f"{metric} by {x} (rows) and {y} (columns): mean with its {summary.confidence:.0%} interval, darker is "
               f"higher. Bold: the highest mean; {TIED}: tied with the top system (the paired interval of the "
               f"difference contains zero).")
    return Table("grid", f"{metric} over the grid {x} x {y}", [f"{x} \\ {y}", *(_value(v) for v in ys)], rows,
                 caption, header_columns=1)


def summary_tables(summary: SweepSummary) -> list[Table]:
    """Every table worth exporting: the means, the pairs (two or more systems), the grid (a grid sweep)."""
    if summary.means.empty:
        return []
    return [t for t in (means_table(summary), pairs_table(summary), grid_table(summary)) if t is not None]


# -- renderers --------------------------------------------------------------------------------------------------


def to_html(table: Table) -> str:
    """An escaped HTML table; superscripts as <sup>, the best in <strong>, shades as a background colour."""
    head = "".join(f"<th>{escape(c)}</th>" for c in table.columns)
    lines = [f'<table class="{escape(table.key)}">', f"<thead><tr>{head}</tr></thead>", "<tbody>"]
    for row in table.rows:
        cells = []
        for i, cell in enumerate(row):
            tag = "th" if i < table.header_columns else "td"
            body = escape(cell.text)
            if cell.marks:
                body += f"<sup>{escape(cell.marks)}</sup>"
            if cell.bold:
                body = f"<strong>{body}</strong>"
            if cell.interval:
                body += f' <span class="ci">{escape(cell.interval)}</span>'
            attrs = ' class="num"' if tag == "td" else ""
            if cell.tip:
                attrs += f' title="{escape(cell.tip)}"'
            if cell.shade is not None:
                attrs += f' style="background: {_shade(cell.shade)}"'
            cells.append(f"<{tag}{attrs}>{body}</{tag}>")
        lines.append("<tr>" + "".join(cells) + "</tr>")
    lines += ["</tbody>", "</table>"]
    return "\n".join(lines)


def to_markdown(table: Table) -> str:
    """A GitHub-flavoured Markdown table under its title; superscripts as ``^abc``, the best in ``**bold**``."""
    def cell(c: Cell) -> str:
        text = c.text + ("^" + c.marks.replace("*", "\\*") if c.marks else "")
        text = f"**{text}**" if c.bold else text
        return _md_escape(f"{text} {c.interval}".strip())

    lines = [f"### {_md_escape(table.title)}", "", "| " + " | ".join(_md_escape(c) for c in table.columns) + " |",
             "|" + "|".join(":--" if i < table.header_columns else "--:" for i in range(len(table.columns))) + "|"]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in table.rows]
    if table.caption:
        lines += ["", _md_escape(table.caption)]
    return "\n".join(lines) + "\n"


def to_latex(table: Table, label: str | None = None) -> str:
    """A booktabs LaTeX table (``\\usepackage{booktabs}``), as ranx's ``Report.to_latex`` makes: means with
    superscript letters, the best of each column in bold; intervals left to the Markdown and HTML."""
    def cell(c: Cell) -> str:
        text = _tex_escape(c.text)
        if c.bold:
            text = f"\\textbf{{{text}}}"
        if c.marks:
            marks = "".join(_TEX_MARKS.get(ch, _tex_escape(ch)) for ch in c.marks)
            text += f"$^{{{marks}}}$"
        return text

    align = "l" * table.header_columns + "r" * (len(table.columns) - table.header_columns)
    lines = ["\\begin{table}[ht]", "\\centering", f"\\caption{{{_tex_escape(table.caption or table.title)}}}",
             f"\\label{{{label or 'tab:' + table.key}}}", f"\\begin{{tabular}}{{{align}}}", "\\toprule",
             " & ".join(f"\\textbf{{{_tex_escape(c)}}}" for c in table.columns) + " \\\\", "\\midrule"]
    lines += [" & ".join(cell(c) for c in row) + " \\\\" for row in table.rows]
    lines += ["\\bottomrule", "\\end{tabular}", "\\end{table}"]
    return "\n".join(lines) + "\n"


def _number(value: float) -> str:
    return "--" if pd.isna(value) else f"{float(value):.{DIGITS}f}"


def _value(value: float) -> str:
    return f"{value:g}"


def _shade(intensity: float) -> str:
    """White to a light blue: dark enough to rank the cells, light enough to read black text on."""
    t = min(1.0, max(0.0, intensity))
    r, g, b = (round(255 + (to - 255) * t) for to in (107, 174, 214))  # '#6baed6', the plots' light blue
    return f"#{r:02x}{g:02x}{b:02x}"


_TEX = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "{": r"\{",
        "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}", "<": r"\textless{}", ">": r"\textgreater{}"}


_TEX_MARKS = {TIED: r"\dagger"}  # superscripts LaTeX's math mode spells otherwise


def _tex_escape(text: str) -> str:
    return "".join(_TEX.get(ch, ch) for ch in str(text))


def _md_escape(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")
