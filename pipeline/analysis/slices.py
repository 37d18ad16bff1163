"""Every figure by slice of the questions, from per-question tables whose ``slice:<field>`` columns say which slice
each question is in (:mod:`pipeline.analysis.slicing` made them).

- **One system** (:func:`slice_means`): per slice, each metric's mean with its bootstrap interval and the count of
  questions, the interval drawn as the job draws its own (same resamples, seed, confidence and method).
- **Several systems against one** (:func:`slice_report`): per slice, each system's means, and its paired difference
  against the reference system (the baseline, or the top one) with its bootstrap interval and randomisation-test
  p-value, Holm-adjusted over every tested (slice, system) cell of a metric, all slicings together; the smallest
  difference the slice detects at 80% power (:mod:`metrics.power`) and whether that is above the system's overall
  difference (then the slice cannot show it); a **reversal** where a slice's significant verdict goes against the
  overall difference's sign.
- **Too small to test**: a slice of ``n`` questions whose best possible sign-flip p-value, ``2^(1-n)``, is not below
  ``1 - confidence`` (fewer than 6 questions at 95%): its means are shown, its differences never tested.

Pure: pandas tables in, pandas tables out.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from metrics.bootstrap import bootstrap_ci
from metrics.comparison import BETTER, SAME, WORSE, compare_many
from metrics.errors import InputError
from metrics.evaluation import figure
from metrics.power import DEFAULT_POWER, minimum_detectable_effect
from metrics.significance import holm
from metrics.spec import parse_metric
from pipeline.analysis.slicing import MISSING, ordered
from pipeline.common.names import SLICE_COLUMN

MEANS_COLUMNS = ["slicing", "slice", "system", "metric", "questions", "mean", "ci_low", "ci_high"]
DIFFERENCE_COLUMNS = ["slicing", "slice", "system", "metric", "questions", "difference", "ci_low", "ci_high",
                      "p_value", "p_holm", "verdict", "tested", "sd", "mde", "overall", "detects_overall"]
ALL = ""  # the slicing (and slice) of the row over all questions


def slice_names(table: pd.DataFrame) -> list[str]:
    """The fields a per-question table is sliced by (its ``slice:<field>`` columns), in its order."""
    return [str(c)[len(SLICE_COLUMN):] for c in table.columns if str(c).startswith(SLICE_COLUMN)]


def labels_of(column: pd.Series) -> pd.Series:
    """A ``slice:`` column as labels: text, an empty cell :data:`MISSING` (a table read back from a CSV types
    ``3`` as a number and an empty cell as NaN)."""
    return column.astype(object).where(column.notna(), MISSING).map(str)


def fewest_tested(confidence: float) -> int:
    """The fewest questions a slice's difference is tested on: the smallest ``n`` whose best possible two-sided
    sign-flip p-value, ``2^(1-n)``, is below ``1 - confidence`` (6 at 95%)."""
    alpha = 1.0 - confidence
    return max(2, math.floor(1 + math.log2(1 / alpha)) + 1)


def _figures(names: Sequence[str], values: np.ndarray, resamples: int, seed: int, confidence: float,
             method: str) -> list[tuple[float, float, float]]:
    """Each column's (mean, low, high), as a job's figures are (gm_map's geometric: metrics.evaluation.figure)."""
    found = bootstrap_ci(values, resamples, seed, confidence, method)
    out = []
    for name, interval in zip(names, found):
        interval = figure(parse_metric(name), interval)
        out.append((interval.mean, interval.low, interval.high))
    return out


def slice_means(table: pd.DataFrame, metrics: Sequence[str], slicings: Sequence[str] | None = None,
                resamples: int = 5000, seed: int = 0, confidence: float = 0.95, method: str = "percentile",
                system: str = "") -> pd.DataFrame:
    """One system's figures by slice: a row per (slicing, slice, metric) with the questions in it, the mean and its
    bootstrap interval (:data:`MEANS_COLUMNS`), slices in reading order."""
    rows = []
    names = list(metrics)
    for name in slicings if slicings is not None else slice_names(table):
        labels = labels_of(table[SLICE_COLUMN + name])
        for label in ordered(labels):
            part = table.loc[(labels == label).to_numpy(), names].to_numpy(dtype=np.float64)
            for metric, (mean, low, high) in zip(names, _figures(names, part, resamples, seed, confidence, method)):
                rows.append((name, label, system, metric, len(part), mean, low, high))
    return pd.DataFrame(rows, columns=MEANS_COLUMNS)


@dataclass
class SliceReport:
    """Several systems by slice against one reference system: see the module's docstring. ``means`` has a row per
    (slicing, slice, system, metric), the slicing :data:`ALL` for all questions; ``differences`` one per
    (slicing, slice, system other than the reference, metric)."""

    reference: str
    systems: list[str]  # the reference first
    metrics: list[str]
    primary: str
    confidence: float
    power: float
    slicings: dict[str, list[str]]  # field -> its slices in reading order
    counts: dict[tuple[str, str], int]  # (field, slice) -> questions
    means: pd.DataFrame
    differences: pd.DataFrame
    notes: list[str] = field(default_factory=list)

    @property
    def fewest(self) -> int:
        return fewest_tested(self.confidence)

    def too_small(self, name: str, label: str) -> bool:
        """Whether a slice has too few questions to test (never the row over all questions)."""
        return name != ALL and self.counts[(name, label)] < self.fewest

    def small(self) -> list[tuple[str, str, int]]:
        """The slices too small to test: (field, slice, questions)."""
        return [(name, label, n) for (name, label), n in self.counts.items() if self.too_small(name, label)]

    def reversals(self, metric: str | None = None) -> pd.DataFrame:
        """The tested cells whose significant verdict goes against the sign of the system's overall difference
        (better overall, significantly worse in the slice, or the other way round)."""
        d = self.differences
        d = d[(d["metric"] == (metric or self.primary)) & (d["slicing"] != ALL) & d["tested"]]
        against = ((d["verdict"] == BETTER) & (d["overall"] < 0)) | ((d["verdict"] == WORSE) & (d["overall"] > 0))
        return d[against]

    def table(self) -> pd.DataFrame:
        """What ``slices.csv`` holds: every system's figures by slice, with its difference against the reference
        (empty for the reference itself)."""
        keys = ["slicing", "slice", "system", "metric"]
        d = self.differences.drop(columns=["questions"]).rename(columns={"ci_low": "difference_ci_low",
                                                                        "ci_high": "difference_ci_high"})
        merged = self.means.merge(d, on=keys, how="left")
        merged.insert(3, "reference", self.reference)
        return merged

    def detectable(self, name: str, label: str, metric: str | None = None) -> float:
        """The slice's detectable difference on a metric: the median over the systems' pairs with the reference
        (NaN when none varies)."""
        d = self.differences
        rows = d[(d["slicing"] == name) & (d["slice"] == label) & (d["metric"] == (metric or self.primary))]
        values = rows["mde"].dropna()
        values = values[values > 0]
        return float(values.median()) if len(values) else math.nan


def assign(tables: Mapping[str, pd.DataFrame], reference: str, names: Sequence[str],
           questions: pd.Index) -> tuple[pd.DataFrame, list[str]]:
    """Each question's slice per field (questions x fields): the reference's label, or, where it has none (a field
    it was not sliced by, a question it left missing), the first other table's that has one. Tables that put a
    question in another slice than the reference (traced runs answered by different traces) are counted in a note:
    the reference's slices are used."""
    order = [reference, *[s for s in tables if s != reference]]
    out, notes = {}, []
    for name in names:
        column = SLICE_COLUMN + name
        found = pd.Series(MISSING, index=questions, dtype=object)
        disagree: set[str] = set()
        for system in order:
            table = tables[system]
            if column not in table.columns:
                continue
            labels = labels_of(table[column]).reindex(questions).fillna(MISSING)
            open_ = (found == MISSING) & (labels != MISSING)
            differs = (found != MISSING) & (labels != MISSING) & (labels != found)
            disagree.update(questions[differs.to_numpy()])
            found[open_] = labels[open_]
        if disagree:
            notes.append(f"slices by {name}: {len(disagree)} question(s) are in another slice in some system's table "
                         f"than in {reference}'s (read from different traces?): {reference}'s slices are used")
        out[name] = found
    return pd.DataFrame(out, index=questions), notes


def slice_report(tables: Mapping[str, pd.DataFrame], reference: str, metrics: Sequence[str], primary: str,
                 slicings: Sequence[str] | None = None, confidence: float = 0.95, resamples: int = 5000,
                 permutations: int = 10000, seed: int = 0, power: float = DEFAULT_POWER) -> SliceReport | None:
    """Every system's figures by slice and its paired differences against ``reference`` (tables: per-question,
    indexed by question id, in the order to show them), over the questions every table holds; None when no table
    carries a slice column (or only ``slicings`` it does not carry). An InputError when a field of ``slicings`` is
    in no table."""
    names_found = list(dict.fromkeys(n for t in tables.values() for n in slice_names(t)))
    if slicings:
        unknown = [n for n in slicings if n not in names_found]
        if unknown:
            have = ", ".join(names_found) or "none: run the jobs with metrics.slices=[FIELD,...]"
            raise InputError(f"no slice column {', '.join(unknown)} in the runs' per-question tables (they are "
                             f"sliced by: {have})")
    names = list(slicings) if slicings else names_found
    if not names or reference not in tables:
        return None
    systems = [reference, *[s for s in tables if s != reference]]
    metrics = [m for m in metrics if all(m in tables[s].columns for s in systems)]
    shared = tables[reference].index
    for system in systems[1:]:
        shared = shared.intersection(tables[system].index, sort=False)
    assigned, notes = assign(tables, reference, names, shared)
    values = {s: tables[s].loc[shared, metrics].astype(np.float64) for s in systems}
    groups: list[tuple[str, str, np.ndarray]] = [(ALL, ALL, np.ones(len(shared), dtype=bool))]
    slicing_order: dict[str, list[str]] = {}
    for name in names:
        labels = assigned[name]
        slicing_order[name] = ordered(labels)
        groups += [(name, label, (labels == label).to_numpy()) for label in slicing_order[name]]
    fewest = fewest_tested(confidence)
    alpha = 1.0 - confidence
    mean_rows, diff_rows = [], []
    overall: dict[tuple[str, str], float] = {}
    for name, label, mask in groups:
        n = int(mask.sum())
        for system in systems:
            part = values[system].to_numpy()[mask]
            found = _figures(metrics, part, resamples, seed, confidence, "percentile") if n else []
            for metric, (mean, low, high) in zip(metrics, found):
                mean_rows.append((name, label, system, metric, n, mean, low, high))
        if len(systems) < 2 or n == 0:
            continue
        base = values[reference][mask]
        others = {s: values[s][mask] for s in systems[1:]}
        compared = (compare_many(base, others, metrics, confidence, resamples, permutations, seed) if n >= 2
                    else None)
        for system in systems[1:]:
            d = (others[system] - base).to_numpy()
            for k, metric in enumerate(metrics):
                column = d[:, k]
                row = compared[system].table.loc[metric] if compared is not None else None
                sd = float(column.std(ddof=1)) if n > 1 else math.nan
                mde = minimum_detectable_effect(sd, n, alpha, power) if n > 1 else math.nan
                if name == ALL:
                    overall[(system, metric)] = float(column.mean())
                whole = overall.get((system, metric), math.nan)
                known = not (math.isnan(whole) or whole == 0 or math.isnan(mde))
                detects = bool(mde <= abs(whole)) if known else None
                diff_rows.append((name, label, system, metric, n, float(column.mean()),
                                  row.ci_low if row is not None else math.nan,
                                  row.ci_high if row is not None else math.nan,
                                  row.p_value if row is not None else math.nan, math.nan, SAME,
                                  name != ALL and n >= fewest, sd, mde, whole, detects))
    differences = pd.DataFrame(diff_rows, columns=DIFFERENCE_COLUMNS)
    if not differences.empty:
        _adjust(differences, alpha)
    counts = {(name, label): int(mask.sum()) for name, label, mask in groups if name != ALL}
    return SliceReport(reference, systems, list(metrics), primary, confidence, power, slicing_order, counts,
                       pd.DataFrame(mean_rows, columns=MEANS_COLUMNS), differences, notes)


def _adjust(differences: pd.DataFrame, alpha: float) -> None:
    """Holm's adjustment over the tested cells of each metric (every slicing's slices, every system), and each
    cell's verdict: better or worse when its interval excludes zero and its adjusted p-value is below ``alpha``
    (metrics.comparison's rule); the row over all questions is adjusted over the metrics, as a comparison is."""
    differences["p_holm"] = math.nan
    whole = differences["slicing"] == ALL
    for system in differences.loc[whole, "system"].unique():
        rows = whole & (differences["system"] == system)
        differences.loc[rows, "p_holm"] = holm(differences.loc[rows, "p_value"].to_numpy())
    for metric in differences["metric"].unique():
        rows = differences["tested"] & (differences["metric"] == metric)
        if rows.any():
            differences.loc[rows, "p_holm"] = holm(differences.loc[rows, "p_value"].to_numpy())
    judged = whole | differences["tested"]
    significant = judged & (differences["p_holm"] < alpha)
    differences["verdict"] = np.where(significant & (differences["ci_low"] > 0), BETTER,
                                      np.where(significant & (differences["ci_high"] < 0), WORSE, SAME))
