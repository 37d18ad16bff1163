"""A sweep's report page, as a colleague reads it: what was measured (header), the verdict, the systems with their
settings and means, every paired difference, what the questions can detect, the grid, the plots, the ranks and each
system's diagnosis (folded, the first failing questions inline and all of them in a CSV beside the page).

Built from plain data: the :class:`~pipeline.analysis.summary.SweepSummary` (whose systems carry their params, tags
and metrics as MLflow holds them), the figures, the diagnosis tables and the names of the files written beside.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from html import escape

import pandas as pd
from matplotlib.figure import Figure

from pipeline.analysis.diagnosis import CLASSES, LABELS
from pipeline.analysis.summary import JUDGED_FLOOR, MAX_PAIRED, SweepSummary, group_label
from pipeline.common.names import DOCUMENTS_METRIC, QUESTIONS_PREFIX, TAG_RESOLVED
from pipeline.reports.html import (
    Section,
    details,
    facts_table,
    figure_html,
    link,
    paragraph,
    render_html,
    table_html,
)
from pipeline.reports.rank_buckets import rank_buckets
from pipeline.reports.slice_text import legend, reversal_lines, slices_frame, small_line
from pipeline.reports.tables import grid_table, letters, means_table, pairs_table, to_html
from pipeline.reports.text import (
    NEEDED_FOR,
    RANK_LEGEND,
    SIGNIFICANT_MARK,
    judged_warning,
    power_text,
    rank_label,
    thin_systems,
    verdict_text,
)

INLINE_FAILURES = 10  # failing questions shown per system; the CSV beside the report has them all
RANK_TABLE_MAX = 200  # up to this many questions, the per-question rank table is in the page (folded)
PERMUTATIONS = 10000  # the randomisation test's sign flips (metrics.comparison's default)
DIAGNOSIS_COLUMNS = ["question", "rank", "first_result", "diagnosis", "evidence"]
# header facts that say where the results are rather than what they are: folded under the header
PROVENANCE = ("judgments", "corpus digest", "sweep folder", "MLflow", "overrides")


@dataclass
class PageFiles:
    """Files written beside the report, as relative links: each system's failing questions, and the rest."""

    diagnosis: dict[str, str] = field(default_factory=dict)  # system -> 'diagnosis/job03_BM25.csv'
    others: dict[str, str] = field(default_factory=dict)  # what it is -> file name


def sweep_page(summary: SweepSummary, title: str, meta: Mapping[str, str],
               figures: Sequence[tuple[str, Figure | bytes]], grid_figure: Figure | None,
               diagnoses: Mapping[str, pd.DataFrame], files: PageFiles,
               cutoff: int = 3, late_limit: int = 10, first: Sequence[Section] = ()) -> str:
    """The whole page. ``meta`` adds rows to the header (sweep folder, MLflow location, overrides, failed jobs);
    ``figures`` are (caption heading, figure or its PNG) for the plots section; ``grid_figure`` the grid's response
    plot; ``first``: sections before the others (a re-scoring's "Judgments")."""
    sections = list(first)
    if not summary.means.empty:
        sections.append(Section("Systems and their means", html=means_html(summary), anchor="means"))
        sections.append(Section("Settings of each system", html=settings_html(summary), anchor="settings"))
        pairs = pairs_table(summary)
        if pairs is not None:
            hover = "Hover a cell for its interval, Holm-adjusted p and the pair's detectable difference."
            sections.append(Section(pairs.title, f"{pairs.caption} {hover}", html=to_html(pairs), anchor="pairs"))
        if not summary.differences.empty:
            sections.append(Section("Differences against the top system, every shown metric",
                                    html=against_top_html(summary), anchor="against-top"))
        power = power_html(summary)
        if power:
            sections.append(Section("What these questions can detect", html=power, anchor="power"))
        if summary.slices is not None:
            sections.append(Section("By slice of the questions", html=slices_html(summary), anchor="slices"))
        grid = grid_table(summary)
        if grid is not None:
            body = to_html(grid) + paragraph(grid.caption, "note")
            if grid_figure is not None:
                body += figure_html(grid_figure)
            sections.append(Section(grid.title, html=body, anchor="grid"))
    if figures:
        sections.append(Section("Plots", html="".join(figure_html(fig, heading) for heading, fig in figures),
                                anchor="plots"))
    if not summary.first_rank.empty:
        sections.append(Section("Rank of the first relevant document", html=ranks_html(summary, cutoff, late_limit,
                                                                                     files), anchor="ranks"))
    if diagnoses:
        sections.append(Section("Failure classes", html=failure_counts_html(diagnoses, cutoff), anchor="failures"))
        sections.append(Section("Diagnosis of each system", html=diagnoses_html(diagnoses, files, cutoff),
                                anchor="diagnosis"))
    if files.others:
        items = "".join(f"<li>{link(path, path)}: {escape(what)}</li>" for what, path in files.others.items())
        sections.append(Section("Files beside this report", html=f"<ul>{items}</ul>", anchor="files"))
    facts = {**measured_facts(summary), **meta}
    shown = {k: v for k, v in facts.items() if k not in PROVENANCE}
    where = {k: v for k, v in facts.items() if k in PROVENANCE}
    intro = (details("Where these results are: " + ", ".join(where), facts_table(where)) if where else "")
    lead = f'<div id="verdict">{verdict_html(summary)}</div>'
    first = 1 if sections and sections[0].anchor == "means" else 0  # the means on the first screen, then contents
    return render_html(title, sections, shown, toc=True, intro=intro + notes_html(summary) + judged_html(summary),
                       lead=lead, toc_after=first)


# -- the header ---------------------------------------------------------------------------------------------------


def measured_facts(summary: SweepSummary) -> dict[str, str]:
    """What was measured, read from the runs: corpus, split, questions, documents, depth, metric and bootstrap
    settings, when and with which code. A value that differs between the runs is listed with "varies"."""
    done = summary.finished or summary.systems
    if not done:
        return {}

    def one(values: list[str | None]) -> str | None:
        found = list(dict.fromkeys(v for v in values if v not in (None, "")))
        if not found:
            return None
        return found[0] if len(found) == 1 else "varies: " + ", ".join(found)

    def param(key: str) -> str | None:
        return one([s.params.get(key) for s in done])

    facts: dict[str, str | None] = {}
    facts["corpus"] = one([_corpus(s.tags, s.params) for s in done])
    facts["split"] = param("corpus.split")
    facts["judgments"] = one([s.tags.get("rankscope.judgments") for s in done])
    facts["questions"] = _questions(summary)
    facts["documents"] = one([_count(s.metrics.get(DOCUMENTS_METRIC)) for s in done])
    facts["depth"] = depth_fact(summary, param("depth"))
    facts["metrics"] = _metric_settings(summary, param)
    facts["bootstrap"] = _bootstrap_settings(param)
    facts["comparisons"] = (f"paired bootstrap over questions and a randomisation test ({PERMUTATIONS:,} sign flips), "
                            f"Holm-adjusted; significant when the {summary.confidence:.0%} interval excludes zero and "
                            f"p < {summary.alpha:.2g}. Detectable difference: paired t, {summary.power:.0%} power")
    facts["corpus digest"] = one([s.corpus_digest for s in done])
    facts["date"] = _dates([s.started_ms for s in done])
    code = one([s.tags.get("rankscope.code_version") for s in done])
    commit = one([s.tags.get("mlflow.source.git.commit") for s in done])
    facts["code version"] = f"{code} (git {commit})" if code and commit else code or commit
    return {k: v for k, v in facts.items() if v}


def ranking_lengths(summary: SweepSummary) -> dict[str, int]:
    """Each finished system's longest ranking, as it ran (its per-question table's ``retrieved``)."""
    found = {}
    for s in summary.finished:
        if s.per_question is not None and "retrieved" in s.per_question.columns:
            longest = pd.to_numeric(s.per_question["retrieved"], errors="coerce").max()
            if longest == longest:
                found[s.name] = int(longest)
    return found


def depth_fact(summary: SweepSummary, asked: str | None) -> str | None:
    """The depth asked for, and where a system's rankings ended sooner (a fusion's own depth, a small corpus)."""
    if asked is None:
        return None
    try:
        depth = int(asked)
    except ValueError:  # "varies: ..."
        return asked
    shorter: dict[int, list[str]] = {}
    for name, longest in ranking_lengths(summary).items():
        if longest < depth:
            shorter.setdefault(longest, []).append(name)
    if not shorter:
        return asked
    documents = {_count(s.metrics.get(DOCUMENTS_METRIC)) for s in summary.finished}
    every = int(documents.pop().replace(",", "")) if len(documents) == 1 and None not in documents else None
    parts = [f"{n}{' (every document)' if n == every else ''} by {', '.join(names)}"
             for n, names in sorted(shorter.items(), reverse=True)]
    return f"{asked} asked; the longest ranking returned: {'; '.join(parts)}"


def _corpus(tags: Mapping[str, str], params: Mapping[str, str]) -> str | None:
    """The loaded corpus's name (the tag; the param is 'null' for a BEIR folder named after itself) and its folder."""
    name = tags.get("rankscope.corpus") or params.get("corpus.name")
    name = None if name in (None, "", "null", "None") else name
    path = params.get("corpus.path")
    return f"{name} ({path})" if name and path else name or path


def _questions(summary: SweepSummary) -> str | None:
    counts = list(dict.fromkeys(len(s.per_question) for s in summary.finished))
    if not counts:
        return None
    text = f"{counts[0]:,} evaluated" if len(counts) == 1 else "varies: " + ", ".join(f"{c:,}" for c in counts)
    key = QUESTIONS_PREFIX + "without_judgments"
    without = list(dict.fromkeys(_count(s.metrics.get(key)) for s in summary.finished))
    if len(without) == 1 and without[0] not in (None, "0"):
        text += f" ({without[0]} more have no judgment at the relevance level and are not counted)"
    return text


def _metric_settings(summary: SweepSummary, param) -> str:
    parts = [f"primary {summary.primary.name}", "shown " + ", ".join(s.name for s in summary.show)]
    for key, label in (("metrics.k", "cutoffs"), ("metrics.measures", "measures"),
                       ("metrics.level", "relevant from grade"), ("metrics.gain", "nDCG gain"),
                       ("metrics.missing", "a question missing from a run scores")):
        value = param(key)
        if value is not None:
            parts.append(f"{label} {value}")
    return "; ".join(parts)


def _bootstrap_settings(param) -> str | None:
    method, resamples = param("metrics.bootstrap.method"), param("metrics.bootstrap.resamples")
    seed, confidence = param("metrics.bootstrap.seed"), param("metrics.bootstrap.confidence")
    if resamples is None:
        return None
    level = f"{float(confidence):.0%}" if confidence and not confidence.startswith("varies") else confidence
    return f"{method} intervals, {resamples} resamples, seed {seed}, {level} confidence"


def _count(value: float | None) -> str | None:
    return None if value is None or value != value else f"{int(value):,}"


def _dates(started: list[int | None]) -> str | None:
    times = sorted(t for t in started if t)
    if not times:
        return None
    first, last = (datetime.fromtimestamp(t / 1000, tz=UTC) for t in (times[0], times[-1]))
    if first.date() == last.date():
        same = first.strftime("%H:%M") == last.strftime("%H:%M")
        return first.strftime("%Y-%m-%d %H:%M") + ("" if same else last.strftime("–%H:%M")) + " UTC (runs started)"
    return f"{first:%Y-%m-%d %H:%M} – {last:%Y-%m-%d %H:%M} UTC (runs started)"


def notes_html(summary: SweepSummary) -> str:
    """What validating the data found (dropped judgments, empty texts ...), once per distinct note, folded under one
    line that counts them."""
    notes = list(dict.fromkeys(note for s in summary.systems for note in s.notes))
    if not notes:
        return ""
    if len(notes) == 1:  # the one line is the note: nothing to unfold
        return f'<section id="data-notes"><p>Data validation notes (1): {escape(notes[0])}</p></section>'
    items = "".join(f"<li>{escape(n)}</li>" for n in notes)
    head = f"Data validation notes: {len(notes)} kinds of correction; unfold to read them"
    return f'<section id="data-notes" class="folded">{details(head, f"<ul>{items}</ul>")}</section>'


def judged_html(summary: SweepSummary) -> str:
    """The terminal's warnings for systems whose judged@10 is below the floor (their nDCG undercounts), in one line
    that names them (a sweep's systems share the corpus, so the warnings repeat each other), the full text folded."""
    thin = summary.thinly_judged()
    if not thin:
        return ""
    items = "".join(f"<li>{escape(judged_warning(system, *found, summary.rbp(system)).removeprefix('warning: '))}</li>"
                    for system, found in thin.items())
    named = thin_systems(thin, len(summary.finished))
    head = (f"Incomplete judgments: judged@10 below {JUDGED_FLOOR} for {named}: nDCG, recall and MAP count the "
            f"unjudged documents as not relevant and undercount {'it' if len(thin) == 1 else 'them'}")
    return f'<section id="judged" class="folded">{details(head, f"<ul>{items}</ul>")}</section>'


# -- the sections ----------------------------------------------------------------------------------------------------


def verdict_html(summary: SweepSummary) -> str:
    parts = [paragraph(verdict_text(summary), "verdict")] if not summary.means.empty else []
    found = summary.detectable()
    if found is not None:
        text = (f"With these {found.n:,} questions, a difference in {summary.primary.name} smaller than about "
                f"{found.mde:.3f} is likely to go undetected: ")
        parts.append(f"<p>{escape(text)}{link('#power', 'what these questions can detect')}.</p>")
    for system in summary.failed:
        parts.append(paragraph(f"FAILED job {system.job} ({system.name}): {system.error or system.status}"))
    return "".join(parts) or paragraph("No job finished.")


def means_html(summary: SweepSummary) -> str:
    table = means_table(summary)
    body = to_html(table) + paragraph(table.caption, "note")
    if len(summary.groups) > MAX_PAIRED:
        body += paragraph(f"{len(summary.groups)} distinct systems: more than {MAX_PAIRED}, so not every pair was "
                          f"compared (no superscripts); each is compared with the top one below.", "note")
    for group in summary.groups:
        if len(group) > 1:
            body += paragraph(f"Identical per question (every shown metric, every question): {' = '.join(group)}.")
    return body


def settings_html(summary: SweepSummary) -> str:
    """One row per system: its letter, name, retriever, swept values and every other retriever setting."""
    tags = letters(summary)
    swept = list(summary.swept)
    lengths = ranking_lengths(summary)
    rows = []
    for system in summary.finished:
        rep = summary.group_of(system.name)[0]
        used = resolved(system.tags)
        row = {"#": tags.get(rep, ""), "system": system.name,
               "retriever": system.params.get("retriever") or system.params.get("retriever.name", "")}
        for key in swept:
            row[key] = _shown(key, system.params.get(key, ""), used)
        row["ranks to"] = lengths.get(system.name, "")
        row["other settings"] = retriever_settings(system.params, swept, used)
        rows.append(row)
    frame = pd.DataFrame(rows).set_index("#")
    note = ("Swept settings have a column each; the other settings are the retriever's (fusion components under "
            "their name), a setting left to follow the corpus shown with the value it took (auto). \"Ranks to\": "
            "the longest ranking the system returned. Systems sharing a letter returned identical results.")
    return table_html(frame) + paragraph(note, "note")


def resolved(tags: Mapping[str, str]) -> dict[str, str]:
    """The settings a run's retriever resolved when it indexed (``rankscope.resolved``: ``retriever.dims=6; ...``)."""
    pairs = (item.partition("=") for item in tags.get(TAG_RESOLVED, "").split("; ") if "=" in item)
    return {key: value for key, _, value in pairs}


def _shown(key: str, value: str, used: Mapping[str, str]) -> str:
    """A setting's value; one left to follow the corpus (null) with the value it took: ``6 (auto)``."""
    return f"{used[key]} (auto)" if key in used and value in ("null", "None", "") else value


def retriever_settings(params: Mapping[str, str], skip: Sequence[str] = (),
                       used: Mapping[str, str] | None = None) -> str:
    """``alpha=0.5, depth=10; first: BM25 (k1=1.2, b=0.75); second: LSA (dims=6 (auto))`` from the ``retriever.*``
    params, and the values ``used`` for settings left null."""
    own, components = [], {}
    used = used or {}
    for key, value in params.items():
        if not key.startswith("retriever.") or key in skip:
            continue
        value = _shown(key, value, used)
        rest = key.removeprefix("retriever.")
        if rest.startswith("components."):
            name, _, leaf = rest.removeprefix("components.").partition(".")
            components.setdefault(name, {})[leaf] = value
        elif rest not in ("_target_", "name"):
            own.append(f"{rest}={value}")
    parts = [", ".join(own)] if own else []
    for name, leaves in components.items():
        inner = ", ".join(f"{k}={v}" for k, v in leaves.items() if k not in ("_target_", "name") and k)
        parts.append(f"{name}: {leaves.get('name', '?')}" + (f" ({inner})" if inner else ""))
    return "; ".join(parts)


def against_top_html(summary: SweepSummary) -> str:
    """Each other system minus the top one on every shown metric, with its interval; * = significant, by the pair
    matrix's rule."""
    level = f"{summary.confidence:.0%}"
    frame = summary.differences.reset_index()
    cells = {}
    for _, row in frame.iterrows():
        mark = " *" if row.significant else ""
        cells.setdefault(summary.label(row.system), {})[row.metric] = (
            f"{row.difference:+.3f} [{row.ci_low:+.3f}, {row.ci_high:+.3f}]{mark}")
    table = pd.DataFrame.from_dict(cells, orient="index").rename_axis("system")
    tied = [group_label(g) for g in summary.groups if g[0] in summary.tied]
    note = (f"System minus {summary.label(summary.best)}, mean over the questions with its paired {level} bootstrap "
            f"interval; {SIGNIFICANT_MARK.format(level=level, alpha=f'{summary.alpha:.2g}')}. Tied with the top on "
            f"{summary.primary.name} (the interval contains zero): {', '.join(tied) if tied else 'none'}. A difference "
            f"whose interval excludes zero without a star is neither tied nor significant after Holm's adjustment.")
    return table_html(table) + paragraph(note, "note")


def power_html(summary: SweepSummary) -> str:
    found = summary.detectable()
    if found is None:
        return ""
    text = power_text(summary).splitlines()
    rows = {f"{d:g}": _needed(found.needed(d)) for d in NEEDED_FOR}
    top_pairs = summary.sensitivity.reset_index()
    observed = top_pairs[(top_pairs.a == summary.best) | (top_pairs.b == summary.best)]
    observed = observed[observed.sd > 0]
    if len(observed):
        closest = observed.loc[observed.difference.abs().idxmin()]
        if closest.difference != 0:
            rows[f"{abs(closest.difference):.4f} (top vs {closest.b if closest.a == summary.best else closest.a})"] = (
                _needed(found.needed(abs(closest.difference))))
    table = pd.DataFrame({"questions needed": list(rows.values())},
                         index=pd.Index(list(rows), name=f"difference in {summary.primary.name}"))
    explain = ("The minimum detectable effect (MDE) is the true difference a two-sided paired test at level "
               f"{found.alpha:.2g} would detect {found.power:.0%} of the time with these questions, given how much the "
               "per-question differences between two systems vary (their standard deviation). A smaller real "
               "difference is likely to come out as tied: a tie is no evidence of equality below the MDE. The "
               "question counts assume new questions vary like these.")
    return "".join(paragraph(line) for line in text) + table_html(table) + paragraph(explain, "note")


def slices_html(summary: SweepSummary) -> str:
    """The compact table by slice (metrics.slices) with its legend, the reversals, the slices too small to test;
    the small multiples are among the plots."""
    report = summary.slices
    assert report is not None
    lines = [*reversal_lines(report, summary.label), small_line(report), *(f"note: {n}" for n in report.notes)]
    return (paragraph(legend(report, summary.label)) + table_html(slices_frame(report, summary.label))
            + "".join(paragraph(line, "note") for line in lines if line))


def _needed(n: int | None) -> str:
    return "more than 10,000,000" if n is None else f"{n:,}"


def ranks_html(summary: SweepSummary, cutoff: int, late_limit: int, files: PageFiles) -> str:
    reps = [r for r in summary.representatives if r in summary.first_rank.columns]
    ranks = summary.first_rank[reps]
    beyond = summary.beyond.reindex(index=ranks.index, columns=reps)
    buckets = rank_buckets(ranks, cutoff, late_limit, beyond).rename(columns=summary.label)
    body = paragraph(f"Questions per rank bucket ({len(ranks):,} questions). {RANK_LEGEND}.") + table_html(buckets)
    if len(ranks) <= RANK_TABLE_MAX:
        shown = pd.DataFrame({summary.label(c): [rank_label(r, b) for r, b in zip(ranks[c], beyond[c])]
                              for c in reps}, index=ranks.index)
        body += details(f"Per question ({len(ranks)} questions)", table_html(shown), open_=len(ranks) <= 30)
    csv = files.others.get("rank of the first relevant document, question x system")
    if csv:
        body += f"<p>{escape('Every question and system: ')}{link(csv, csv)}</p>"
    return body


def failure_counts_html(diagnoses: Mapping[str, pd.DataFrame], cutoff: int) -> str:
    counts = pd.DataFrame({s: {LABELS[c]: int(t[c].sum()) for c in CLASSES} for s, t in diagnoses.items()}).T
    counts.index.name = "system"
    return (paragraph(f"Questions per class (first relevant not in the top {cutoff}, or near-duplicates crowding the "
                      "top); a question may be in several.") + table_html(counts))


def failing(table: pd.DataFrame) -> pd.DataFrame:
    """The questions a diagnosis flags: missed at the cutoff, or carrying a failure class."""
    return table[table["missed"] | table[list(CLASSES)].any(axis=1)]


def diagnoses_html(diagnoses: Mapping[str, pd.DataFrame], files: PageFiles, cutoff: int) -> str:
    """One folded block per system: its first failing questions, and a link to all of them."""
    blocks = []
    for system, table in diagnoses.items():
        bad = failing(table)
        head = f"{system}: {len(bad)} of {len(table)} questions miss the top {cutoff} or carry a failure class"
        if not len(bad):
            blocks.append(details(head, paragraph("Nothing to diagnose.")))
            continue
        body = table_html(bad[DIAGNOSIS_COLUMNS].head(INLINE_FAILURES))
        csv = files.diagnosis.get(system)
        if csv:
            more = (f"The other {len(bad) - INLINE_FAILURES} and these: " if len(bad) > INLINE_FAILURES else
                    "The same as a CSV: ")
            body += f"<p>{escape(more)}{link(csv, csv)}</p>"
        blocks.append(details(head, body))
    return "".join(blocks)
