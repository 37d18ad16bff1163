"""The figures by slice of the questions as terminal text: a job's primary metric per slice, and one compact table of
every system per slice against a reference (a sweep's top system, a comparison's baseline) with the lines that say
what the table cannot: reversals, slices too small to test, how the slices were assigned."""

from __future__ import annotations

import math
from collections.abc import Callable

import pandas as pd

from metrics.comparison import BETTER, WORSE
from pipeline.analysis.slices import ALL, SliceReport
from pipeline.reports.text import format_table

MAX_SYSTEMS = 6  # systems a table shows beside the reference; the others are in slices.csv
WORDS = {BETTER: "better", WORSE: "worse"}


def slice_name(name: str, label: str) -> str:
    """``team=billing``; ``all questions`` for the row over all of them."""
    return "all questions" if name == ALL else f"{name}={label}"


def job_slices_text(figures: pd.DataFrame, primary: str, confidence: float, file: str) -> str:
    """A job's primary metric per slice: the questions in it, the mean and its interval."""
    rows = [("slice", "questions", "mean", f"{confidence:.0%} interval")]
    for r in figures[figures["metric"] == primary].itertuples(index=False):
        rows.append((slice_name(r.slicing, r.slice), str(r.questions), f"{r.mean:.3f}",
                     f"[{r.ci_low:.3f}, {r.ci_high:.3f}]"))
    return f"{primary} by slice (every metric in {file})\n" + format_table(rows, "lrrl")


def _cell(report: SliceReport, name: str, label: str, system: str) -> tuple[str, str]:
    """A system's mean in a slice, and its difference against the reference with its marks."""
    m = report.means
    mean = m[(m["slicing"] == name) & (m["slice"] == label) & (m["system"] == system) & (m["metric"] == report.primary)]
    shown = f"{mean['mean'].iloc[0]:.3f}" if len(mean) else "--"
    if system == report.reference:
        return shown, ""
    d = report.differences
    row = d[(d["slicing"] == name) & (d["slice"] == label) & (d["system"] == system) & (d["metric"] == report.primary)]
    if row.empty:
        return shown, ""
    r = row.iloc[0]
    undetectable = (bool(r.tested) and r.verdict not in WORDS and not pd.isna(r.detects_overall)
                    and not bool(r.detects_overall))  # a tie this slice could not have told from the overall gap
    marks = ("*" if r.verdict in WORDS else "") + ("?" if undetectable else "")
    return shown, f"{r.difference:+.3f}{marks}"


def slices_frame(report: SliceReport, label: Callable[[str], str] = str) -> pd.DataFrame:
    """The compact table as a frame: a row per slice (all questions first) with its questions, the reference's
    mean, each other system's mean and difference against it (up to :data:`MAX_SYSTEMS`), and the slice's
    detectable difference (``too small to test`` below the fewest questions a test can use)."""
    shown = report.systems[: MAX_SYSTEMS + 1]
    rows, index = [], []
    total = int(report.means[report.means["slicing"] == ALL]["questions"].max())
    for name, label_ in [(ALL, ALL), *[(n, s) for n, slices in report.slicings.items() for s in slices]]:
        n = total if name == ALL else report.counts[(name, label_)]
        row = {"n": str(n)}
        for system in shown:
            mean, difference = _cell(report, name, label_, system)
            row[label(system)] = f"{mean} {difference}".rstrip()
        if len(report.systems) > 1:
            mde = report.detectable(name, label_)
            row["MDE"] = ("too small to test" if report.too_small(name, label_) else "--" if math.isnan(mde)
                          else f"{mde:.3f}")
        rows.append(row)
        index.append(slice_name(name, label_))
    return pd.DataFrame(rows, index=pd.Index(index, name="slice"))


def legend(report: SliceReport, label: Callable[[str], str] = str, what: str = "the top system") -> str:
    """What the table shows and what its marks mean."""
    tested = report.differences
    tested = tested[tested["tested"] & (tested["metric"] == report.primary)]
    head = (f"By slice: {report.primary} of each system, and each one's difference against {label(report.reference)}"
            + (f" ({what})" if what else ""))
    if len(report.systems) < 2:
        return head
    return (f"{head}\n(* significant: its paired {report.confidence:.0%} interval excludes zero and its "
            f"randomisation-test p-value, Holm-adjusted over the {len(tested)} tested slice x system cell(s), is below "
            f"{1 - report.confidence:.2g}; ? not significant, and the slice could not detect the system's overall "
            f"difference: its MDE is larger; MDE: the difference the slice detects at {report.power:.0%} power, "
            f"median over the systems)")


def small_line(report: SliceReport) -> str:
    """The slices too small to test, named with their questions (empty when none is, or nothing is compared)."""
    small = report.small()
    if not small or len(report.systems) < 2:
        return ""
    return (f"Too small to test (fewer than {report.fewest} questions: a sign-flip test cannot reach p < "
            f"{1 - report.confidence:.2g}): " + ", ".join(f"{slice_name(n, s)} ({k})" for n, s, k in small))


def slices_table(report: SliceReport, label: Callable[[str], str] = str, what: str = "the top system") -> str:
    """The compact table (:func:`slices_frame`) under its legend; then the reversals, the slices too small to test,
    and the notes."""
    frame = slices_frame(report, label)
    rows = [("slice", *frame.columns), *[(str(i), *row) for i, row in zip(frame.index, frame.itertuples(index=False))]]
    aligns = "lrr" + "l" * (len(frame.columns) - 2)
    lines = [legend(report, label, what), format_table(rows, aligns)]
    if len(report.systems) > MAX_SYSTEMS + 1:
        lines.append(f"({len(report.systems) - MAX_SYSTEMS - 1} more systems in the table of every figure by slice)")
    lines += reversal_lines(report, label)
    lines += [line for line in [small_line(report)] if line]
    lines += [f"note: {note}" for note in report.notes]
    return "\n".join(lines)


def reversal_lines(report: SliceReport, label: Callable[[str], str] = str) -> list[str]:
    """One line per slice whose significant verdict goes against a system's overall difference."""
    lines = []
    d = report.differences
    for r in report.reversals().itertuples(index=False):
        whole = d[(d["slicing"] == ALL) & (d["system"] == r.system) & (d["metric"] == r.metric)].iloc[0]
        overall = "better" if whole.difference > 0 else "worse"
        said = "" if whole.verdict in WORDS else ", not significantly"
        lines.append(f"REVERSAL: {label(r.system)} is {overall} than {label(report.reference)} overall on {r.metric} "
                     f"({whole.difference:+.3f} [{whole.ci_low:+.3f}, {whole.ci_high:+.3f}]{said}) but "
                     f"{WORDS[r.verdict]} on {slice_name(r.slicing, r.slice)}: {r.difference:+.3f} "
                     f"[{r.ci_low:+.3f}, {r.ci_high:+.3f}], Holm p {r.p_holm:.4f}, {r.questions} questions")
    return lines
