"""Compare two systems question by question, and decide whether a candidate regressed.

Pure: two per-question tables in, a table of paired differences and verdicts out. The MLflow edges that find
the tables live in ``pipeline.compare``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations

import numpy as np
import pandas as pd

from metrics.bootstrap import (
    DEFAULT_CONFIDENCE,
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    percentile_bounds,
    resample_means_by_counts,
)
from metrics.significance import holm, pair_p_values, randomisation_p_values

BETTER, WORSE, SAME = "better", "worse", "indistinguishable"
PAIR_COLUMNS = 256  # all_pairs works on this many (pair, metric) columns at a time


@dataclass(frozen=True)
class Comparison:
    """One row per metric: both means, the paired difference (candidate - baseline) with its interval,
    the randomisation-test p-value (raw and Holm-adjusted across metrics) and a verdict."""

    table: pd.DataFrame
    only_in_baseline: list[str] = field(default_factory=list)
    only_in_candidate: list[str] = field(default_factory=list)
    confidence: float = DEFAULT_CONFIDENCE

    def verdict(self, metric: str) -> str:
        return str(self.table.loc[metric, "verdict"])


def compare(
    baseline: pd.DataFrame,
    candidate: pd.DataFrame,
    metrics: Sequence[str] | None = None,
    confidence: float = DEFAULT_CONFIDENCE,
    resamples: int = DEFAULT_RESAMPLES,
    permutations: int = 10000,
    seed: int = DEFAULT_SEED,
) -> Comparison:
    """Align two per-question tables (index = question id) and compare every metric column they share.

    A metric is ``better``/``worse`` only when its interval excludes zero *and* its Holm-adjusted p-value is
    below ``1 - confidence``; otherwise the two systems cannot be told apart on it.
    """
    return compare_many(baseline, {"candidate": candidate}, metrics, confidence, resamples, permutations,
                        seed)["candidate"]


def compare_many(
    baseline: pd.DataFrame,
    candidates: Mapping[str, pd.DataFrame],
    metrics: Sequence[str] | None = None,
    confidence: float = DEFAULT_CONFIDENCE,
    resamples: int = DEFAULT_RESAMPLES,
    permutations: int = 10000,
    seed: int = DEFAULT_SEED,
) -> dict[str, Comparison]:
    """:func:`compare` of one baseline with each candidate, keyed like ``candidates``.

    Candidates aligned alike (the same shared questions and metrics: a sweep's systems) are resampled together: the
    random draws are made once for all of them instead of once per candidate. Each one's interval is the one
    :func:`compare` gives it alone (the same resamples, every column resampled on its own) and so is its p-value (the
    same sign flips; one matrix product serves every column, as in :func:`all_pairs`). The resample means of the
    differences are summed as :func:`all_pairs` sums them (``resample_means_by_counts``: the resamples
    docs/helpdesk-reference.md describes, equal up to float rounding): a sweep's 44 difference columns in 13-15 ms
    instead of 81-95.
    """
    prepared = []  # (name, metrics, shared questions, baseline values, candidate values)
    for name, candidate in candidates.items():
        names = list(metrics) if metrics is not None else [c for c in baseline.columns if c in candidate.columns]
        missing = [m for m in names if m not in baseline.columns or m not in candidate.columns]
        if missing:
            raise ValueError(f"metric(s) not in both tables: {', '.join(missing)}")
        shared = baseline.index.intersection(candidate.index, sort=False)
        if len(shared) == 0:
            raise ValueError("the two runs have no question in common")
        a = baseline.loc[shared, names].to_numpy(dtype=np.float64)
        b = candidate.loc[shared, names].to_numpy(dtype=np.float64)
        prepared.append((name, names, shared, a, b))
    batches: list[list[int]] = []  # candidates that share their questions and metrics
    for i, (_, names, shared, _, _) in enumerate(prepared):
        batch = next((g for g in batches if prepared[g[0]][1] == names and prepared[g[0]][2].equals(shared)), None)
        if batch is None:
            batches.append([i])
        else:
            batch.append(i)
    out = {}
    for batch in batches:
        diffs = [prepared[i][4] - prepared[i][3] for i in batch]
        together = np.concatenate(diffs, axis=1)
        low, high = percentile_bounds(resample_means_by_counts(together, resamples, seed), confidence)
        p = randomisation_p_values(together, permutations, seed)  # one randomisation_test per column, flips shared
        width = diffs[0].shape[1]
        for k, i in enumerate(batch):
            name, names, shared, a, b = prepared[i]
            part = slice(k * width, (k + 1) * width)
            out[name] = _comparison(baseline, candidates[name], names, shared, a, b, diffs[k], low[part],
                                    high[part], p[part], confidence)
    return {name: out[name] for name in candidates}


def _comparison(baseline: pd.DataFrame, candidate: pd.DataFrame, metrics: list[str], shared: pd.Index,
                a: np.ndarray, b: np.ndarray, diff: np.ndarray, low: np.ndarray, high: np.ndarray, p: np.ndarray,
                confidence: float) -> Comparison:
    """One candidate's table and verdicts from its resampled bounds and p-values."""
    p_holm = holm(p)
    alpha = 1.0 - confidence
    verdicts = np.where((low > 0) & (p_holm < alpha), BETTER, np.where((high < 0) & (p_holm < alpha), WORSE, SAME))
    table = pd.DataFrame(
        {
            "baseline": a.mean(axis=0),
            "candidate": b.mean(axis=0),
            "difference": diff.mean(axis=0),
            "ci_low": low,
            "ci_high": high,
            "p_value": p,
            "p_holm": p_holm,
            "verdict": verdicts,
        },
        index=pd.Index(metrics, name="metric"),
    )
    common = set(shared)  # once: built per question, it made every comparison quadratic in the questions
    return Comparison(
        table,
        [q for q in baseline.index if q not in common],
        [q for q in candidate.index if q not in common],
        confidence,
    )


def all_pairs(
    tables: Mapping[str, pd.DataFrame],
    metrics: Sequence[str],
    confidence: float = DEFAULT_CONFIDENCE,
    resamples: int = DEFAULT_RESAMPLES,
    permutations: int = 10000,
    seed: int = DEFAULT_SEED,
) -> pd.DataFrame:
    """Every pair of systems compared on every metric, as a ranx-style report needs it.

    ``tables`` maps a system to its per-question table (index = question id), in the order the report lists them;
    only the questions every table holds are compared. One row per pair ``(a, b)`` (a listed before b) and metric:
    ``difference`` (mean of a - b) with its paired bootstrap interval, the randomisation-test ``p_value``, ``p_holm``
    (Holm-adjusted over all the pairs, metric by metric: the family is "every pair on this metric") and
    ``significant``: the interval excludes zero *and* ``p_holm`` is below ``1 - confidence`` (:func:`compare`'s rule).
    Each pair's interval and p-value are the ones :func:`compare` gives that pair alone (same resamples, same flips;
    the resample means summed by one matrix product, equal up to float rounding).
    """
    names = list(tables)
    columns = ["difference", "ci_low", "ci_high", "p_value", "p_holm", "significant"]
    pairs = list(combinations(range(len(names)), 2))
    index = pd.MultiIndex.from_tuples([(names[i], names[j], m) for i, j in pairs for m in metrics],
                                      names=["a", "b", "metric"])
    if not pairs or not metrics:
        return pd.DataFrame(columns=columns, index=index)
    shared = tables[names[0]].index
    for name in names[1:]:
        shared = shared.intersection(tables[name].index, sort=False)
    if len(shared) == 0:
        raise ValueError("the systems have no question in common")
    width = len(metrics)
    values = np.concatenate([tables[name].loc[shared, list(metrics)].to_numpy(dtype=np.float64) for name in names],
                            axis=1)  # questions x (system, metric)
    first = np.array([i * width + k for i, _ in pairs for k in range(width)], dtype=np.int64)  # (pair, metric) ->
    second = np.array([j * width + k for _, j in pairs for k in range(width)], dtype=np.int64)  # a's, b's column
    diff = values[:, first] - values[:, second]  # questions x (pair, metric)
    # A resample's mean difference is the difference of the two systems' resample means: each system's column is
    # resampled once (a sweep has fewer systems than pairs), the same resamples compare() draws.
    means = resample_means_by_counts(values, resamples, seed)
    low, high = np.empty(diff.shape[1]), np.empty(diff.shape[1])
    for start in range(0, diff.shape[1], PAIR_COLUMNS):  # a block at a time: memory stays flat with many pairs
        block = slice(start, start + PAIR_COLUMNS)
        low[block], high[block] = percentile_bounds(means[:, first[block]] - means[:, second[block]], confidence)
    p = pair_p_values(values, first, second, permutations, seed, PAIR_COLUMNS)
    by_metric = p.reshape(len(pairs), len(metrics))
    p_holm = np.column_stack([holm(by_metric[:, j]) for j in range(len(metrics))]).ravel()
    excludes = (low > 0) | (high < 0)
    return pd.DataFrame({"difference": diff.mean(axis=0), "ci_low": low, "ci_high": high, "p_value": p,
                         "p_holm": p_holm, "significant": excludes & (p_holm < 1.0 - confidence)}, index=index)


@dataclass(frozen=True)
class GateResult:
    passed: bool
    reason: str  # one line: 'REGRESSION: ...' or 'PASS: ...'


def gate(comparison: Comparison, metrics: Sequence[str], tolerance: float = 0.0) -> GateResult:
    """Fail only when, on some metric, the candidate is worse than the baseline by more than ``tolerance``
    with the comparison's confidence: the whole interval of (candidate - baseline) lies below ``-tolerance``
    *and* the drop is significant (Holm-adjusted p-value below ``1 - confidence``).

    Otherwise it passes and says why: the interval contains zero or the tolerance boundary (indistinguishable),
    the drop lies within the tolerance, or the candidate is better. Compare only the gated metrics, so Holm's
    adjustment runs over those.
    """
    if tolerance < 0:
        raise ValueError("the tolerance is the largest acceptable drop: it must be >= 0")
    alpha = 1.0 - comparison.confidence
    failures, notes = [], []
    for metric in metrics:
        if metric not in comparison.table.index:
            raise ValueError(f"gate metric {metric!r} was not compared (have: {', '.join(comparison.table.index)})")
        row = comparison.table.loc[metric]
        interval = f"{row.difference:+.4f} [{row.ci_low:+.4f}, {row.ci_high:+.4f}]"
        significant = row.p_holm < alpha
        if row.ci_high < -tolerance and significant:
            failures.append(f"{metric} dropped by {-row.difference:.4f}, {interval}, beyond the tolerance "
                            f"{tolerance:.4f} at {comparison.confidence:.0%} confidence (p={row.p_holm:.4f})")
        elif row.ci_high < -tolerance:
            notes.append(f"{metric} indistinguishable: the drop {interval} is not significant after Holm's "
                         f"adjustment (p={row.p_holm:.4f})")
        elif row.ci_low > 0 and significant:
            notes.append(f"{metric} better: {interval}")
        elif row.ci_high < 0 and row.ci_low >= -tolerance:
            notes.append(f"{metric} worse but within the tolerance {tolerance:.4f}: {interval}")
        elif row.ci_low <= -tolerance <= row.ci_high and tolerance > 0 and row.ci_high < 0:
            notes.append(f"{metric} indistinguishable from the tolerance boundary -{tolerance:.4f}: {interval}")
        else:
            notes.append(f"{metric} indistinguishable from the baseline: {interval} (tolerance {tolerance:.4f})")
    if failures:
        return GateResult(False, "REGRESSION: " + "; ".join(failures))
    return GateResult(True, "PASS: " + "; ".join(notes))
