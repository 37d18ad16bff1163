"""Several assessors: how much they agree on the graded scale, where they disagree, and one grade per pair.

- Cohen's kappa (Cohen 1960) for two assessors, over the pairs both graded: unweighted, and weighted (Cohen 1968)
  with quadratic weights, the usual choice for an ordinal scale; as scikit-learn's ``cohen_kappa_score`` computes
  them (checked against it in the tests).
- Krippendorff's alpha (Krippendorff 2011, "Computing Krippendorff's alpha-reliability") for any number of assessors,
  some pairs graded by only some of them, with the ordinal difference function over the scale's grades; as the
  ``krippendorff`` package computes it (checked against it in the tests).
- Light's kappa (Light 1971) for three assessors or more: the mean of Cohen's kappa over every two of them (and the
  same mean of the quadratic-weighted ones).
- Merge rules: ``majority`` (the grade most assessors gave) and ``median`` (the median grade). A pair the rule leaves
  tied (several grades given equally often; an even number of grades whose two middle ones differ: two assessors who
  differ, always) is settled by ``ties``: ``lower`` (the lowest of the tied grades, so a pair is never called more
  relevant than half of its assessors said), ``higher``, or ``adjudicated`` (only a third assessor's grade settles
  it). An adjudicated grade, where there is one, settles its tie whatever ``ties`` says: a person decided.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import combinations

import numpy as np
import pandas as pd

from metrics.errors import InputError

MAJORITY, MEDIAN = "majority", "median"
RULES = (MAJORITY, MEDIAN)
LOWER, HIGHER, ADJUDICATED = "lower", "higher", "adjudicated"
TIES = (LOWER, HIGHER, ADJUDICATED)
# the figures an agreement threshold may be set on, and what they are called
KAPPA, WEIGHTED_KAPPA, ALPHA = "kappa", "weighted_kappa", "alpha"
MEASURES = {KAPPA: "Cohen's kappa", WEIGHTED_KAPPA: "quadratic-weighted kappa", ALPHA: "Krippendorff's alpha"}
KEY = ["query_id", "doc_id"]
ANNOTATION_COLUMNS = [*KEY, "assessor", "grade"]


def ratings(annotations: pd.DataFrame) -> pd.DataFrame:
    """Pairs x assessors, the grade each gave (NaN: not graded by that assessor). A pair graded twice by the same
    assessor keeps the later grade (an annotation updated in place)."""
    latest = annotations.drop_duplicates([*KEY, "assessor"], keep="last")
    return latest.pivot(index=KEY, columns="assessor", values="grade").astype(float)


def cohen_kappa(a: Sequence[float], b: Sequence[float], grades: Sequence[int], weights: str | None = None) -> float:
    """Cohen's kappa of two assessors' grades of the same pairs; ``weights``: None, ``linear`` or ``quadratic``.
    NaN when chance agreement is total (both gave one and the same grade to every pair)."""
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    index = {g: i for i, g in enumerate(grades)}
    n = len(grades)
    observed = np.zeros((n, n))
    np.add.at(observed, ([index[int(v)] for v in x], [index[int(v)] for v in y]), 1.0)
    expected = np.outer(observed.sum(axis=1), observed.sum(axis=0)) / max(observed.sum(), 1.0)
    distance = np.abs(np.subtract.outer(np.arange(n), np.arange(n))).astype(float)
    if weights is None:
        w = (distance > 0).astype(float)
    elif weights == "linear":
        w = distance
    elif weights == "quadratic":
        w = distance**2
    else:
        raise ValueError(f"weights {weights!r}: expected None, 'linear' or 'quadratic'")
    chance = float((w * expected).sum())
    return float("nan") if chance == 0 else 1.0 - float((w * observed).sum()) / chance


def krippendorff_alpha(matrix: np.ndarray, grades: Sequence[int], level: str = "ordinal") -> float:
    """Krippendorff's alpha of ``matrix`` (pairs x assessors, NaN where an assessor gave no grade), over the values
    ``grades`` (the scale, lowest first); ``level``: ``nominal``, ``ordinal`` or ``interval``. Pairs graded by fewer
    than two assessors do not count. NaN when there is no variation to measure agreement on."""
    values = np.asarray(matrix, dtype=float)
    index = {g: i for i, g in enumerate(grades)}
    n_values = len(grades)
    counts = np.zeros((values.shape[0], n_values))  # per pair: how many assessors gave each grade
    for j in range(values.shape[1]):
        graded = ~np.isnan(values[:, j])
        rows = np.flatnonzero(graded)
        np.add.at(counts, (rows, [index[int(v)] for v in values[graded, j]]), 1.0)
    m = counts.sum(axis=1)
    pairable = m >= 2
    counts, m = counts[pairable], m[pairable]
    if len(m) == 0:
        return float("nan")
    # the coincidence matrix: o_ck = sum over pairs of n_uc (n_uk - [c = k]) / (m_u - 1)
    coincidence = np.einsum("uc,uk->ck", counts / (m - 1)[:, None], counts) - np.diag((counts / (m - 1)[:, None])
                                                                                    .sum(axis=0))
    n_c = coincidence.sum(axis=1)
    n = n_c.sum()
    c, k = np.meshgrid(np.arange(n_values), np.arange(n_values), indexing="ij")
    if level == "nominal":
        delta = (c != k).astype(float)
    elif level == "interval":
        g = np.asarray(grades, dtype=float)
        delta = (g[c] - g[k]) ** 2
    elif level == "ordinal":
        cumulative = np.concatenate(([0.0], np.cumsum(n_c)))
        low, high = np.minimum(c, k), np.maximum(c, k)
        delta = (cumulative[high + 1] - cumulative[low] - (n_c[c] + n_c[k]) / 2.0) ** 2
    else:
        raise ValueError(f"level {level!r}: expected nominal, ordinal or interval")
    expected = float((np.outer(n_c, n_c) * delta).sum())
    if expected == 0:
        return float("nan")
    return 1.0 - (n - 1) * float((coincidence * delta).sum()) / expected


@dataclass(frozen=True)
class Agreement:
    """How several assessors agreed: who, on how many pairs, the figures, and every pair they disagreed on."""

    assessors: list[str]
    shared: int  # pairs graded by two assessors or more
    exact: float  # share of those pairs whose grades are all equal
    alpha: float  # Krippendorff's alpha, ordinal
    kappa: float | None = None  # Cohen's kappa (two assessors); Light's kappa, the mean over pairs (three or more)
    weighted_kappa: float | None = None  # ... with quadratic weights
    pairwise: dict[tuple[str, str], float] = field(default_factory=dict)  # quadratic kappa per pair of assessors
    disagreements: pd.DataFrame = field(default_factory=pd.DataFrame)  # query_id, doc_id, grades (by assessor)

    def figure(self, measure: str) -> float:
        """The figure ``measure`` names (``MEASURES``); NaN where it is not defined (no pair graded twice, or no
        variation to measure agreement on)."""
        value = {KAPPA: self.kappa, WEIGHTED_KAPPA: self.weighted_kappa, ALPHA: self.alpha}[measure]
        return float("nan") if value is None else float(value)

    def name(self, measure: str) -> str:
        """What ``measure`` is called here: Cohen's kappa for two assessors, Light's for more."""
        if measure == ALPHA:
            return "Krippendorff's alpha (ordinal)"
        kappa = "Cohen's kappa" if len(self.assessors) == 2 else "Light's kappa"
        return kappa if measure == KAPPA else f"quadratic-weighted {kappa}"

    def below(self, measure: str, minimum: float) -> bool:
        """Whether the assessors agree less than ``minimum`` on ``measure`` (an undefined figure is not below)."""
        value = self.figure(measure)
        return not np.isnan(value) and value < minimum

    def lines(self) -> list[str]:
        """What the terminal and the version's notes say."""
        head = (f"{len(self.assessors)} assessors ({', '.join(self.assessors)}), {self.shared} pairs graded by two "
                f"or more: {self.exact:.1%} graded alike")
        if self.shared == 0:
            return [f"{len(self.assessors)} assessors ({', '.join(self.assessors)}): no pair graded by two of them, "
                    f"no agreement to measure"]
        figures = []
        if self.kappa is not None:
            mean = "" if len(self.assessors) == 2 else " (the mean of Cohen's over every two assessors)"
            figures.append(f"{self.name(KAPPA)}{mean} {_shown(self.kappa)} (quadratic-weighted "
                           f"{_shown(self.weighted_kappa)})")
        figures.append(f"Krippendorff's alpha (ordinal) {_shown(self.alpha)}")
        return [head + "; " + ", ".join(figures), f"{len(self.disagreements)} pair(s) with different grades"]


def _shown(value: float | None) -> str:
    return "n/a" if value is None or np.isnan(value) else f"{value:.3f}"


def agreement(annotations: pd.DataFrame, grades: Sequence[int]) -> Agreement:
    """The agreement of the assessors of ``annotations`` (``ANNOTATION_COLUMNS``) on the scale ``grades``."""
    table = ratings(annotations)
    assessors = [str(a) for a in table.columns]
    values = table.to_numpy()
    several = (~np.isnan(values)).sum(axis=1) >= 2
    shared = table[several]
    same = shared.apply(lambda row: row.dropna().nunique() == 1, axis=1) if len(shared) else pd.Series(dtype=bool)
    exact = float(same.mean()) if len(shared) else float("nan")
    alpha = krippendorff_alpha(values, grades)
    pairwise, plain = {}, {}
    for a, b in combinations(assessors, 2):
        both = table[[a, b]].dropna()
        if len(both):
            pairwise[(a, b)] = cohen_kappa(both[a], both[b], grades, "quadratic")
            plain[(a, b)] = cohen_kappa(both[a], both[b], grades)
    kappa = weighted = None
    if pairwise:  # two assessors: Cohen's; more: Light's, the mean over the pairs that graded something together
        kappa, weighted = _mean(plain.values()), _mean(pairwise.values())
    differing = shared[~same] if len(shared) else shared
    listed = pd.DataFrame({
        "query_id": [q for q, _ in differing.index], "doc_id": [d for _, d in differing.index],
        "grades": [", ".join(f"{a}={int(v)}" for a, v in row.dropna().items()) for _, row in differing.iterrows()],
    })
    return Agreement(assessors, int(several.sum()), exact, alpha, kappa, weighted, pairwise, listed)


def _mean(values: Iterable[float]) -> float:
    found = [v for v in values if not np.isnan(v)]
    return float(np.mean(found)) if found else float("nan")


def candidates(grades: np.ndarray, rule: str) -> np.ndarray:
    """The grades ``rule`` cannot choose between (one: no tie), lowest first; ``grades`` sorted."""
    if rule == MEDIAN:
        n = len(grades)
        return np.unique(grades[[(n - 1) // 2, n // 2]])
    values, counts = np.unique(grades, return_counts=True)
    return values[counts == counts.max()]


def merge(annotations: pd.DataFrame, rule: str = MAJORITY, ties: str = LOWER,
          adjudicated: pd.DataFrame | None = None) -> pd.DataFrame:
    """One grade per pair, by ``rule``, a tie settled by ``adjudicated`` (``query_id``, ``doc_id``, ``grade``: a
    third assessor's grade of the pair) where it holds the pair, else by ``ties``. Columns: ``query_id``, ``doc_id``,
    ``grade``, ``assessors`` (how many graded it), ``tied`` (the rule left it tied), ``adjudicated`` (a third
    assessor settled it), ``open`` (tied, and ``ties`` is ``adjudicated`` but nobody has settled it yet: its grade,
    the lower one, stands in). Pairs in first-annotated order."""
    if rule not in RULES:
        raise InputError(f"merge rule {rule!r}: expected one of {', '.join(RULES)}")
    if ties not in TIES:
        raise InputError(f"ties {ties!r}: expected one of {', '.join(TIES)}")
    given = adjudicated if adjudicated is not None else pd.DataFrame(columns=[*KEY, "grade"])
    settled = {(str(q), str(d)): int(g) for q, d, g in zip(given["query_id"], given["doc_id"], given["grade"])}
    latest = annotations.drop_duplicates([*KEY, "assessor"], keep="last")
    rows = []
    for (query, doc), group in latest.groupby(KEY, sort=False):
        grades = np.sort(group["grade"].to_numpy(dtype=np.int64))
        found = candidates(grades, rule)
        pair = (str(query), str(doc))
        tied = len(found) > 1
        settles = tied and pair in settled
        grade = settled[pair] if settles else int(found[-1] if ties == HIGHER else found[0])
        rows.append((*pair, grade, len(grades), tied, settles, tied and not settles and ties == ADJUDICATED))
    return pd.DataFrame(rows, columns=[*KEY, "grade", "assessors", "tied", "adjudicated", "open"])


def tied_pairs(annotations: pd.DataFrame, rule: str = MAJORITY) -> pd.DataFrame:
    """The pairs ``rule`` leaves tied (``query_id``, ``doc_id``, ``grades``: each assessor's, by name), in
    first-annotated order: what an adjudication round asks a third assessor to settle."""
    latest = annotations.drop_duplicates([*KEY, "assessor"], keep="last")
    rows = []
    for (query, doc), group in latest.groupby(KEY, sort=False):
        if len(candidates(np.sort(group["grade"].to_numpy(dtype=np.int64)), rule)) > 1:
            given = ", ".join(f"{a}={int(g)}" for a, g in sorted(zip(group["assessor"].astype(str), group["grade"])))
            rows.append((str(query), str(doc), given))
    return pd.DataFrame(rows, columns=[*KEY, "grades"])
