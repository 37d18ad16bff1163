"""Comparisons and the gate by slice of the questions (``metrics.slices``): ``pipeline.compare --slice team=billing``
compares two runs on one slice's questions, ``--slice team`` adds a table of every slice of ``team``; the gate with
``slice_tolerance`` also fails when a slice is worse than the baseline by more than it.

Which slice a question is in comes from the runs' per-question tables (their ``slice:<field>`` columns, the
baseline's where the two differ); the statistics are :mod:`pipeline.analysis.slices`'.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from metrics.comparison import Comparison, GateResult, gate
from pipeline.analysis.slices import SliceReport, assign, slice_names, slice_report
from pipeline.analysis.slicing import ordered
from pipeline.decisions.comparison import DataError, Side
from pipeline.reports.slice_text import slice_name, slices_table

SLICE_HINT = "a job slices its questions with metrics.slices=[FIELD,...]"


def parse_slices(given: Sequence[str]) -> tuple[dict[str, str], list[str]]:
    """``--slice`` arguments: ``NAME=VALUE`` restricts the comparison to that slice, ``NAME`` breaks it down by
    every slice of ``NAME``."""
    only: dict[str, str] = {}
    by: list[str] = []
    for text in given:
        name, equals, value = text.partition("=")
        name = name.strip()
        if not name or (equals and not value.strip()):
            raise DataError(f"--slice {text!r}: expected FIELD=VALUE (a slice: team=billing) or FIELD (every slice of "
                            f"it: team)")
        if equals:
            only[name] = value.strip()
        else:
            by.append(name)
    return only, list(dict.fromkeys(by))


def _sliced_by(baseline: Side, candidate: Side) -> list[str]:
    return list(dict.fromkeys([*slice_names(baseline.table), *slice_names(candidate.table)]))


def _check_names(names: Sequence[str], baseline: Side, candidate: Side, what: str) -> None:
    have = _sliced_by(baseline, candidate)
    unknown = [n for n in names if n not in have]
    if unknown:
        listed = ", ".join(have) if have else "none"
        raise DataError(f"{what} {', '.join(unknown)}: neither run's per-question table has that slice column (they "
                        f"are sliced by: {listed}; {SLICE_HINT})")


def restrict(baseline: Side, candidate: Side, only: dict[str, str]) -> tuple[Side, Side, str]:
    """Both sides cut to the questions they share that are in every slice of ``only`` (field -> slice), and the line
    that says so. A field neither table carries, a slice no question is in, or one of a single question is a
    DataError naming what there is."""
    _check_names(list(only), baseline, candidate, "--slice")
    shared = baseline.table.index.intersection(candidate.table.index, sort=False)
    labels, _ = assign({"baseline": baseline.table, "candidate": candidate.table}, "baseline", list(only), shared)
    keep = shared
    for name, value in only.items():
        column = labels[name]
        if not (column == value).any():
            counts = column.value_counts()
            listed = ", ".join(f"{label} ({counts[label]})" for label in ordered(counts.index))
            raise DataError(f"--slice {name}={value}: no question the two runs share is in that slice (slices of "
                            f"{name}: {listed})")
        keep = keep.intersection(column.index[column == value], sort=False)
    said = " and ".join(slice_name(n, v) for n, v in only.items())
    if len(keep) < 2:
        which = f" ({keep[0]})" if len(keep) else ""
        raise DataError(f"--slice {said}: {len(keep)} question{'' if len(keep) == 1 else 's'} of the two runs "
                        f"{'is' if len(keep) == 1 else 'are'} in that slice{which}: too few to compare (at least 2)")
    line = f"Slice {said}: {len(keep)} of the {len(shared)} questions the runs share"
    return (dataclasses.replace(baseline, table=baseline.table.loc[keep]),
            dataclasses.replace(candidate, table=candidate.table.loc[keep]), line)


def breakdown(baseline: Side, candidate: Side, names: Sequence[str], metrics: Sequence[str], primary: str,
              confidence: float, resamples: int, permutations: int, seed: int) -> str:
    """The comparison by every slice of ``names``: the compact table (the candidate against the baseline, Holm over
    the slices), its reversals and the slices too small to test."""
    _check_names(names, baseline, candidate, "--slice")
    first, second = f"{baseline.name} (baseline)", f"{candidate.name} (candidate)"
    report = slice_report({first: baseline.table, second: candidate.table}, first, metrics, primary, names,
                          confidence, resamples, permutations, seed)
    assert report is not None
    return slices_table(report, what="")


def slice_gate(comparison: Comparison, metrics: Sequence[str], baseline: Side, candidate: Side,
               settings: Any) -> GateResult:
    """The gate (:func:`metrics.comparison.gate`); with ``settings.slice_tolerance``, also per slice of the fields
    ``settings.slices`` names (every one the tables carry when empty): a slice fails when, on a gated metric, the
    candidate's paired interval lies below ``-slice_tolerance`` and the drop is significant, Holm-adjusted over the
    tested slices of that metric. Slices too small to test never fail, and are named."""
    result = gate(comparison, metrics, float(settings.tolerance))
    tolerance = settings.get("slice_tolerance")
    if tolerance is None:
        return result
    names = [str(n) for n in settings.get("slices") or []]
    if not names and not _sliced_by(baseline, candidate):
        raise DataError(f"gate.slice_tolerance={tolerance}: the runs' per-question tables carry no slice column "
                        f"({SLICE_HINT})")
    _check_names(names, baseline, candidate, "gate.slices:")
    report = slice_report({"baseline": baseline.table, "candidate": candidate.table}, "baseline", metrics,
                          metrics[0], names or None, float(settings.confidence), int(settings.resamples),
                          int(settings.permutations), int(settings.seed))
    assert report is not None
    return _with_slices(result, report, float(tolerance))


def _with_slices(result: GateResult, report: SliceReport, tolerance: float) -> GateResult:
    """The gate's result with its slices' verdict joined: the slices beyond the tolerance named (a regression),
    or how many were tested and which were too small."""
    d = report.differences
    tested = d[d["tested"]]
    alpha = 1.0 - report.confidence
    failing = tested[(tested["ci_high"] < -tolerance) & (tested["p_holm"] < alpha)]
    small = [f"{slice_name(n, s)} ({k})" for n, s, k in report.small()]
    too_small = f"; too small to test: {', '.join(small)}" if small else ""
    if len(failing):
        lines = [f"slice {slice_name(r.slicing, r.slice)}: {r.metric} dropped by {-r.difference:.4f} "
                 f"[{r.ci_low:+.4f}, {r.ci_high:+.4f}] ({r.questions} questions), beyond the slice tolerance "
                 f"{tolerance:.4f} at {report.confidence:.0%} confidence (Holm p={r.p_holm:.4f})"
                 for r in failing.itertuples(index=False)]
        head = result.reason if not result.passed else "REGRESSION:"
        joiner = "; " if not result.passed else " "
        return GateResult(False, head + joiner + "; ".join(lines) + too_small)
    cells = tested[["slicing", "slice"]].drop_duplicates()
    said = (f"no slice worse by more than {tolerance:.4f} ({len(cells)} tested, Holm-adjusted over them"
            f"{too_small})")
    return GateResult(result.passed, f"{result.reason}; slices: {said}")
