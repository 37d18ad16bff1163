"""What re-scoring against a new qrels version changed: each system's figures before and after, the ordering of the
systems (Kendall's tau between the two orderings) and every pairwise verdict that flipped."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.stats import kendalltau

from metrics.comparison import all_pairs

TIED = "tied"


@dataclass(frozen=True)
class Changes:
    """Before and after, side by side."""

    metric: str
    table: pd.DataFrame  # system x (before, after, moved, judged_before, judged_after, rank_before, rank_after)
    tau: float  # Kendall's tau-b between the orderings by ``metric`` (NaN with fewer than two systems)
    verdicts: pd.DataFrame  # (a, b) x (before, after, flipped): 'a better', 'b better' or 'tied'

    @property
    def flipped(self) -> pd.DataFrame:
        return self.verdicts[self.verdicts["flipped"]]


def verdicts(tables: Mapping[str, pd.DataFrame], metric: str, confidence: float = 0.95, resamples: int = 5000,
             permutations: int = 10000, seed: int = 0) -> pd.Series:
    """For every pair of systems, who is better on ``metric`` (``a better``, ``b better``) or ``tied``, by the
    paired bootstrap and randomisation test of the sweep's summary (``metrics.comparison.all_pairs``)."""
    tables = {name: table for name, table in tables.items() if len(table)}  # nothing scored: no verdict
    if len(tables) < 2:
        return pd.Series(dtype=object, index=pd.MultiIndex.from_tuples([], names=["a", "b"]), name="verdict")
    pairs = all_pairs({name: table[[metric]] for name, table in tables.items()}, [metric], confidence, resamples,
                      permutations, seed).xs(metric, level="metric")
    said = [TIED if not row.significant else ("a better" if row.difference > 0 else "b better")
            for row in pairs.itertuples()]
    return pd.Series(said, index=pairs.index, name="verdict")


def ordering(means: Mapping[str, float]) -> list[str]:
    """Systems best first (ties in the order given)."""
    names = list(means)
    return sorted(names, key=lambda s: (-means[s], names.index(s)))


def changes(before: Mapping[str, pd.DataFrame], after: Mapping[str, pd.DataFrame], metric: str,
            judged: str | None = None, confidence: float = 0.95, resamples: int = 5000, permutations: int = 10000,
            seed: int = 0) -> Changes:
    """``before`` and ``after``: each system's per-question table (index: question id) under the old and the new
    qrels version; ``metric`` the primary metric, ``judged`` the judged@k column (when the tables hold it). Means are
    over each table's questions (those with a relevant judgment in its version)."""
    systems = [s for s in before if s in after]
    mean_b = {s: _mean(before[s], metric) for s in systems}
    mean_a = {s: _mean(after[s], metric) for s in systems}
    rows = {"before": mean_b, "after": mean_a, "moved": {s: mean_a[s] - mean_b[s] for s in systems}}
    if judged is not None:
        rows["judged_before"] = {s: _mean(before[s], judged) for s in systems}
        rows["judged_after"] = {s: _mean(after[s], judged) for s in systems}
    table = pd.DataFrame(rows, index=pd.Index(systems, name="system"))
    order_b, order_a = ordering(mean_b), ordering(mean_a)
    table["rank_before"] = [order_b.index(s) + 1 for s in systems]
    table["rank_after"] = [order_a.index(s) + 1 for s in systems]
    scored = [s for s in systems if not (np.isnan(mean_b[s]) or np.isnan(mean_a[s]))]
    tau = float(kendalltau([mean_b[s] for s in scored], [mean_a[s] for s in scored]).statistic) \
        if len(scored) > 1 else float("nan")
    said_b = verdicts({s: before[s] for s in systems}, metric, confidence, resamples, permutations, seed)
    said_a = verdicts({s: after[s] for s in systems}, metric, confidence, resamples, permutations, seed)
    pairs = pd.DataFrame({"before": said_b, "after": said_a}).fillna("not scored")
    pairs["flipped"] = (pairs["before"] != pairs["after"]) & (pairs[["before", "after"]] != "not scored").all(axis=1)
    return Changes(metric, table, tau, pairs)


def _mean(table: pd.DataFrame, column: str) -> float:
    return float(table[column].mean()) if column in table.columns and len(table) else float(np.nan)
