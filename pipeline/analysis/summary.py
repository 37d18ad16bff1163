"""The end-of-sweep summary: every system side by side, from plain data (``pipeline.tracking.readback`` reads
the child runs back from MLflow into :class:`SystemRun` s).

It says only what the questions support. Systems with identical per-question results are one *group* (listed
once, "A = B (identical per question)"); systems whose paired interval against the top one contains zero are
*tied* with it, so no single best system is named among equals; every pair of groups is compared (ranx-style
letters, Holm-adjusted); the spread of the per-question differences says how small a difference these
questions can detect at all (:mod:`metrics.power`); and, when the jobs were sliced (``metrics.slices``), every
figure is given by slice of the questions (:mod:`pipeline.analysis.slices`).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass, field
from itertools import combinations

import numpy as np
import pandas as pd

from metrics.comparison import all_pairs, compare_many
from metrics.power import DEFAULT_POWER, Sensitivity, minimum_detectable_effect
from metrics.significance import holm
from metrics.spec import MetricSpec
from pipeline.analysis.slices import SliceReport, slice_report
from pipeline.common.names import LOWER, NOT_RELEVANT_METRIC, UPPER

IDENTICAL = "identical per question"
LISTED_IN_LABEL = 3  # a group of more systems is labelled "A and N others (identical per question)"
BEYOND = re.compile(r"beyond depth (\d+)")
MAX_PAIRED = 40  # above this many distinct systems (780 pairs), only the comparisons against the top one are made

JUDGED = MetricSpec("judged", 10)
JUDGED_FLOOR = 0.8  # below it, too much of a system's top 10 was never judged: its nDCG undercounts
RBP, RBP_RESIDUAL = MetricSpec("rbp"), MetricSpec("rbp_resid")  # a thinly judged system's warning shows them


def thinly_judged(judged: float | None) -> bool:
    """True when a system's judged@10 (None: not measured) is below :data:`JUDGED_FLOOR`."""
    return judged is not None and not pd.isna(judged) and judged < JUDGED_FLOOR


@dataclass
class SystemRun:
    """One child run as MLflow has it."""

    run_id: str
    name: str
    status: str
    job: int
    metrics: dict[str, float]
    error: str | None = None
    corpus_digest: str | None = None
    per_question: pd.DataFrame | None = None  # index: question id
    params: dict[str, str] = field(default_factory=dict)  # the run's config, flattened ('retriever.k1': '0.9')
    tags: dict[str, str] = field(default_factory=dict)
    started_ms: int | None = None  # when the run started (ms since the epoch)
    notes: list[str] = field(default_factory=list)  # what validating its data found, one line each

    @property
    def finished(self) -> bool:
        return self.status == "FINISHED" and self.per_question is not None


@dataclass
class SweepSummary:
    """All systems of a sweep side by side: means, first-relevant ranks, groups of identical results, ties with the
    top system, paired differences against it and between every pair, and what the questions can detect."""

    parent_run_id: str
    systems: list[SystemRun]
    show: list[MetricSpec]
    primary: MetricSpec
    confidence: float = 0.95
    best: str | None = None  # the top system by the primary metric (the reference of `differences`)
    means: pd.DataFrame = field(default_factory=pd.DataFrame)  # system x (metric, metric/ci_low, metric/ci_high)
    first_rank: pd.DataFrame = field(default_factory=pd.DataFrame)  # question x system, <NA> = not in the ranking
    beyond: pd.DataFrame = field(default_factory=pd.DataFrame)  # question x system: N when the ranking was full to
    # depth N without a relevant document (so one may lie deeper), <NA> otherwise
    differences: pd.DataFrame = field(default_factory=pd.DataFrame)  # (system, metric) x difference, bounds, p,
    # significant (the one rule every section stars by: see `significant_against_top`)
    same_data: bool = True  # False: systems were measured on different collections, so not compared per question
    groups: list[list[str]] = field(default_factory=list)  # systems with identical results, in job order
    tied: list[str] = field(default_factory=list)  # systems whose primary-metric interval vs `best` contains zero
    pairs: pd.DataFrame = field(default_factory=pd.DataFrame)  # (a, b, metric): every pair of groups (up to
    # MAX_PAIRED groups)
    sensitivity: pd.DataFrame = field(default_factory=pd.DataFrame)  # (a, b): n, sd, mde on the primary metric
    swept: dict[str, list[str]] = field(default_factory=dict)  # params that differ between the systems
    power: float = DEFAULT_POWER
    slices: SliceReport | None = None  # metrics.slices: every group by slice, against the top one

    @property
    def finished(self) -> list[SystemRun]:
        return [s for s in self.systems if s.finished]

    @property
    def failed(self) -> list[SystemRun]:
        return [s for s in self.systems if not s.finished]

    @property
    def alpha(self) -> float:
        return 1.0 - self.confidence

    @property
    def unjudged(self) -> bool:
        """True when jobs finished but none scored a question: none of their questions is judged yet."""
        done = self.finished
        return bool(done) and all(s.per_question.empty for s in done)

    def group_of(self, system: str) -> list[str]:
        """The system's group (itself alone when no other system has its results)."""
        return next((g for g in self.groups if system in g), [system])

    def label(self, system: str) -> str:
        """The system's name, or its group's: ``A = B (identical per question)``."""
        return group_label(self.group_of(system))

    @property
    def representatives(self) -> list[str]:
        """The first system of each group, in job order: the rows of the collapsed tables."""
        return [g[0] for g in self.groups]

    @property
    def top_group(self) -> list[str]:
        return self.group_of(self.best) if self.best else []

    @property
    def single_best(self) -> bool:
        """True when one system alone is ahead of every other one (no identical twin, no tie)."""
        return self.best is not None and len(self.top_group) == 1 and not self.tied and self.same_data

    def detectable(self) -> Sensitivity | None:
        """The question set's sensitivity on the primary metric: the median spread of differences over the pairs of
        distinct groups (and its MDE); None without two distinct groups."""
        varying = self.sensitivity[self.sensitivity["sd"] > 0] if not self.sensitivity.empty else self.sensitivity
        if varying.empty:
            return None
        n = int(varying["n"].iloc[0])
        sd = float(varying["sd"].median())
        return Sensitivity(n, sd, minimum_detectable_effect(sd, n, self.alpha, self.power), self.alpha, self.power)

    def thinly_judged(self) -> dict[str, tuple[float, bool]]:
        """Finished systems whose judged@10 is below :data:`JUDGED_FLOOR`: (judged@10, whether their judgments list
        only relevant documents). Systems that did not measure judged@10 are not listed."""
        found = {s.name: s for s in self.finished}
        return {name: (float(s.metrics[JUDGED.mlflow_key]), s.metrics.get(NOT_RELEVANT_METRIC) == 0)
                for name, s in found.items() if thinly_judged(s.metrics.get(JUDGED.mlflow_key))}

    def rbp(self, name: str) -> tuple[float, float] | None:
        """A finished system's rbp and its residual (how much its unjudged documents could add), when it measured
        both."""
        found = next((s for s in self.finished if s.name == name), None)
        if found is None or RBP.mlflow_key not in found.metrics or RBP_RESIDUAL.mlflow_key not in found.metrics:
            return None
        return float(found.metrics[RBP.mlflow_key]), float(found.metrics[RBP_RESIDUAL.mlflow_key])


def group_label(members: list[str]) -> str:
    """``A``; ``A = B (identical per question)``; ``A and 7 others (identical per question)``."""
    if len(members) == 1:
        return members[0]
    if len(members) <= LISTED_IN_LABEL:
        return " = ".join(members) + f" ({IDENTICAL})"
    return f"{members[0]} and {len(members) - 1} others ({IDENTICAL})"


def unique_names(systems: list[SystemRun]) -> None:
    """Systems sharing a name are told apart by job number, then (a sweep resumed with settings the names do not
    show runs job 0 again) by run id: every table of the summary has one row per system."""
    for label in (lambda s: f"{s.name} #{s.job}", lambda s: f"{s.name} ({s.run_id[:8]})"):
        counts = Counter(s.name for s in systems)
        for s in systems:
            if counts[s.name] > 1:
                s.name = label(s)


def summarize(systems: list[SystemRun], parent_run_id: str, show: list[MetricSpec], primary: MetricSpec,
              confidence: float = 0.95, resamples: int = 5000, seed: int = 0,
              permutations: int = 10000, compare: bool = True) -> SweepSummary:
    """Means from the runs' metrics; groups, ties, ranks and paired differences from their per-question tables.

    With ``compare=False`` the comparisons between systems (the differences against the top one and which tie with
    it, every pair's statistics, the question set's sensitivity) are left for :func:`compare_systems`: a sweep's end
    starts drawing the figures that need none of them first."""
    summary = SweepSummary(parent_run_id, systems, show, primary, confidence)
    done = summary.finished
    if not done or summary.unjudged:  # nothing to tabulate or compare
        return summary
    columns = {}
    for spec in show:
        for suffix, logged in (("", ""), ("/ci_low", LOWER), ("/ci_high", UPPER)):
            columns[spec.name + suffix] = [s.metrics.get(spec.mlflow_key + logged, float("nan")) for s in done]
    summary.means = pd.DataFrame(columns, index=pd.Index([s.name for s in done], name="system"))
    summary.swept = swept_params(done)
    key = primary.mlflow_key
    best = max(done, key=lambda s: (s.metrics.get(key, float("-inf")), -s.job))
    summary.best = best.name
    summary.same_data = len({s.corpus_digest for s in done}) == 1
    summary.groups = [[s.name] for s in done]
    if not summary.same_data:
        return summary
    summary.first_rank = pd.DataFrame(
        {s.name: s.per_question["first_relevant_rank"].astype("Int64") for s in done}
    ).rename_axis("query_id")
    summary.beyond = pd.DataFrame({s.name: beyond_depth(s.per_question) for s in done}).rename_axis("query_id")
    summary.groups = identical_groups(done, _compared_metrics(summary), summary.beyond)
    summary.best = summary.group_of(best.name)[0]
    if compare:
        compare_systems(summary, confidence, resamples, seed, permutations)
    return summary


def compare_systems(summary: SweepSummary, confidence: float = 0.95, resamples: int = 5000, seed: int = 0,
                    permutations: int = 10000) -> None:
    """Add to a summary made with ``compare=False`` the differences of each group against the top one (and which
    tie with it on the primary metric), every pair's statistics and the sensitivity of the question set."""
    done = summary.finished
    if not done or not summary.same_data or summary.best is None:
        return
    names = _compared_metrics(summary)
    by_name = {s.name: s for s in done}
    top = by_name[summary.best]
    frames = []
    others = [by_name[group[0]] for group in summary.groups if group[0] != top.name] if names else []
    against_top = compare_many(top.per_question[names], {s.name: s.per_question[names] for s in others}, names,
                               confidence, resamples, permutations, seed)  # resampled once for all the systems
    for group in summary.groups:
        if group[0] == top.name or not names:
            continue
        system = by_name[group[0]]
        table = against_top[system.name].table
        frames.append(table.assign(system=system.name, same_as="; ".join(group[1:]))
                      .reset_index().set_index(["system", "metric"]))
    primary = summary.primary
    if frames:
        summary.differences = pd.concat(frames)
        if primary.name in names:
            primary_rows = summary.differences.xs(primary.name, level="metric")
            contains_zero = primary_rows[(primary_rows.ci_low <= 0) & (primary_rows.ci_high >= 0)]
            summary.tied = [s for rep in contains_zero.index for s in summary.group_of(rep)]
    if 1 < len(summary.groups) <= MAX_PAIRED and names:
        tables = {rep: by_name[rep].per_question for rep in summary.representatives}
        summary.pairs = all_pairs(tables, names, confidence, resamples, permutations, seed)
    if frames:
        summary.differences["significant"] = significant_against_top(summary)
    if primary.name in names:
        summary.sensitivity = pair_sensitivity({rep: by_name[rep].per_question[primary.name]
                                                for rep in summary.representatives}, summary.alpha, summary.power)
    if names and primary.name in names:  # the tables carry slice columns (metrics.slices): every figure by slice
        summary.slices = slice_report({rep: by_name[rep].per_question for rep in summary.representatives}, top.name,
                                      names, primary.name, None, confidence, resamples, permutations, seed,
                                      summary.power)


def significant_against_top(summary: SweepSummary) -> list[bool]:
    """For each row of ``summary.differences``: whether that system differs significantly from the top one, by the
    rule of the pair matrix and the letters, so that a star means one thing in every section: the paired interval
    excludes zero *and* the randomisation-test p, Holm-adjusted over every pair compared on that metric, is below
    alpha. The pair's own row of ``summary.pairs`` says it; above :data:`MAX_PAIRED` groups, where only the
    comparisons against the top are made, Holm's adjustment runs over those. (A tie is another rule, named as one: the
    interval contains zero. A difference whose interval excludes zero may be neither tied nor significant.)"""
    frame = summary.differences
    excludes = ((frame.ci_low > 0) | (frame.ci_high < 0)).to_numpy()
    if not summary.pairs.empty:
        order = {rep: i for i, rep in enumerate(summary.representatives)}
        found = summary.pairs["significant"].to_dict()
        top = summary.best
        return [bool(found[(system, top, metric) if order[system] < order[top] else (top, system, metric)])
                for system, metric in frame.index]
    p_holm = pd.Series(frame.p_value.to_numpy(), index=frame.index).groupby(level="metric").transform(
        lambda p: holm(p.to_numpy()))
    return [bool(e and p < summary.alpha) for e, p in zip(excludes, p_holm.reindex(frame.index))]


def _compared_metrics(summary: SweepSummary) -> list[str]:
    """The shown metrics every finished system's per-question table holds."""
    return [spec.name for spec in summary.show if all(spec.name in s.per_question.columns for s in summary.finished)]


def identical_groups(systems: list[SystemRun], metrics: list[str],
                     beyond: pd.DataFrame | None = None) -> list[list[str]]:
    """Systems whose per-question values agree exactly on every metric, the first relevant rank and whether the
    ranking was full to its depth, grouped in job order (a system alone is a group of one). ``beyond``: each
    system's :func:`beyond_depth` (a column per system), when the caller has it already."""
    groups: dict[bytes, list[str]] = {}
    for system in systems:
        table = system.per_question.sort_index()
        values = table[metrics].to_numpy(dtype=np.float64) if metrics else np.zeros((len(table), 0))
        ranks = table["first_relevant_rank"].astype("Float64").fillna(-1.0).to_numpy(dtype=np.float64)
        deep = beyond[system.name].reindex(table.index) if beyond is not None else beyond_depth(table)
        beyond_values = deep.astype("Float64").fillna(-1.0).to_numpy(dtype=np.float64)
        key = b"\0".join([("\n".join(map(str, table.index))).encode(), np.nan_to_num(values, nan=-2.0).tobytes(),
                          ranks.tobytes(), beyond_values.tobytes()])
        groups.setdefault(key, []).append(system.name)
    return list(groups.values())


def beyond_depth(per_question: pd.DataFrame) -> pd.Series:
    """Per question, the depth N when no relevant document is in a ranking full to depth N (the diagnosis's
    "beyond depth N"), <NA> when one was found or the ranking ended early (not retrieved)."""
    index = per_question.index
    if "first_relevant" in per_question.columns:
        found = per_question["first_relevant"].astype(str).str.extract(BEYOND, expand=False)
        return pd.to_numeric(found, errors="coerce").astype("Int64").rename(None)
    if "retrieved" not in per_question.columns:
        return pd.Series(pd.NA, index=index, dtype="Int64")
    retrieved = pd.to_numeric(per_question["retrieved"], errors="coerce")
    width = retrieved.max()
    if not width or math.isnan(width):
        return pd.Series(pd.NA, index=index, dtype="Int64")
    full = per_question["first_relevant_rank"].isna() & (retrieved >= width)
    return pd.Series(np.where(full, int(width), 0), index=index).astype("Int64").where(full)


def swept_params(systems: list[SystemRun]) -> dict[str, list[str]]:
    """The params every system has and whose value differs between them, with their values in order of first
    appearance (a key only some retrievers have, a fusion's ``alpha``, is a setting of those, not a swept one)."""
    keys = [k for k in dict.fromkeys(k for s in systems for k in s.params) if all(k in s.params for s in systems)]
    swept = {}
    for key in keys:
        values = [s.params[key] for s in systems]
        if len(set(values)) > 1:
            swept[key] = list(dict.fromkeys(str(v) for v in values))
    return swept


def numeric_keys(swept: dict[str, list[str]]) -> list[str]:
    """The swept keys whose every value is a number (the axes of a grid)."""
    return [key for key, values in swept.items() if all(_is_number(v) for v in values)]


def _is_number(text: str) -> bool:
    try:
        return math.isfinite(float(text))
    except (TypeError, ValueError):
        return False


def pair_sensitivity(scores: dict[str, pd.Series], alpha: float, power: float) -> pd.DataFrame:
    """Each pair's spread of per-question differences on one metric and the difference it can detect."""
    rows = []
    shared = None
    for series in scores.values():
        shared = series.index if shared is None else shared.intersection(series.index, sort=False)
    values = {name: series.loc[shared].to_numpy(dtype=np.float64) for name, series in scores.items()}  # once each
    for a, b in combinations(scores, 2):
        d = values[a] - values[b]
        sd = float(d.std(ddof=1)) if len(d) > 1 else 0.0
        mde = minimum_detectable_effect(sd, len(d), alpha, power) if len(d) > 1 else math.nan
        rows.append({"a": a, "b": b, "n": len(d), "difference": float(d.mean()), "sd": sd, "mde": mde})
    return pd.DataFrame(rows, columns=["a", "b", "n", "difference", "sd", "mde"]).set_index(["a", "b"])
