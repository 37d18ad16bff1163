"""Is one run better, worse, or indistinguishable from another? Both runs' per-question tables, aligned by
question id, compared metric by metric (``metrics.comparison``: paired bootstrap, randomisation test, Holm).

The runs must have been measured on the same corpus and judgments (same digest) with the same evaluation
settings, unless the caller allows otherwise; they are read through ``pipeline.tracking``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pandas as pd

from metrics.bootstrap import DEFAULT_CONFIDENCE, DEFAULT_RESAMPLES, DEFAULT_SEED
from metrics.comparison import BETTER, SAME, WORSE, Comparison, GateResult, compare
from metrics.errors import InputError
from metrics.power import sensitivity
from metrics.spec import parse_metric, parse_metrics
from pipeline.common.names import (
    PER_QUESTION_TABLE,
    TAG_CORPUS,
    TAG_CORPUS_DIGEST,
    TAG_OVERRIDES,
    TAG_RANKINGS_FROM,
    TAG_SYSTEM,
)
from pipeline.reports.text import format_table
from pipeline.tracking.client import MlflowClient, Run
from pipeline.tracking.comparisons import record_comparison
from pipeline.tracking.readback import per_question_table
from pipeline.tracking.selectors import describe

PERMUTATIONS = 10000
# Evaluation settings that change every per-question value: runs differing in them are not comparable.
SETTINGS = ("metrics.level", "metrics.gain", "metrics.missing")
MAX_LISTED = 20


class DataError(InputError):
    """The two runs cannot be compared (different data, no per-question table, nothing in common)."""


@dataclass(frozen=True)
class Side:
    """One run and its per-question table (index: question id; one column per metric)."""

    run: Run
    table: pd.DataFrame

    @property
    def run_id(self) -> str:
        return self.run.info.run_id

    @property
    def name(self) -> str:
        return self.run.data.tags.get(TAG_SYSTEM) or self.run.info.run_name or self.run_id

    @property
    def corpus_digest(self) -> str | None:
        return self.run.data.tags.get(TAG_CORPUS_DIGEST)

    @property
    def corpus(self) -> str:
        return self.run.data.tags.get(TAG_CORPUS) or self.run.data.params.get("corpus.name", "?")

    @property
    def overrides(self) -> str:
        """``, overrides: retriever.k1=0 ...`` when the run was made with any (they tell same-named runs apart)."""
        given = self.run.data.tags.get(TAG_OVERRIDES, "")
        return f", overrides: {given}" if given else ""

    @property
    def rankings_from(self) -> str | None:
        """Where the run's rankings were read, when rankscope did not compute them (``retriever=traces``)."""
        return self.run.data.tags.get(TAG_RANKINGS_FROM)

    def settings(self) -> dict[str, str | None]:
        return {key: self.run.data.params.get(key) for key in SETTINGS}

    def metrics(self) -> list[str]:
        """The table's metric columns, in its order."""
        names = []
        for column in map(str, self.table.columns):
            try:
                if parse_metric(column).name == column:
                    names.append(column)
            except InputError:  # question text, ranks, top documents ...
                continue
        return names


def load_side(client: MlflowClient, run: Run) -> Side:
    """Read the run's per-question table (``per_question.json``) back from MLflow."""
    if run.info.status != "FINISHED":
        raise DataError(f"{describe(run)} is {run.info.status}, not FINISHED: it has no complete results")
    table = per_question_table(client, run)
    if table is None:
        raise DataError(f"{describe(run)} has no per-question table ({PER_QUESTION_TABLE}): only runs of "
                        f"rankscope jobs can be compared")
    if "query_id" not in table.columns:
        raise DataError(f"{describe(run)}: {PER_QUESTION_TABLE} has no query_id column")
    table["query_id"] = table["query_id"].astype(str)
    return Side(run, table.set_index("query_id"))


def check_comparable(baseline: Side, candidate: Side, allow_different_corpus: bool = False) -> list[str]:
    """Refuse runs on different corpora/judgments or evaluation settings; with ``allow``, return warnings."""
    problems = []
    a, b = baseline.corpus_digest, candidate.corpus_digest
    if a != b:
        problems.append(f"different corpus or judgments: baseline {baseline.corpus} digest {a}, candidate "
                        f"{candidate.corpus} digest {b}")
    for key, (x, y) in {k: (baseline.settings()[k], candidate.settings()[k]) for k in SETTINGS}.items():
        if x != y:
            problems.append(f"different {key}: baseline {x}, candidate {y}")
    if problems and not allow_different_corpus:
        raise DataError(f"refusing to compare {baseline.name} with {candidate.name}: {'; '.join(problems)} "
                        f"(--allow-different-corpus compares the questions they share anyway)")
    return problems


def shared_metrics(baseline: Side, candidate: Side, wanted: Sequence[str] | None = None) -> list[str]:
    """The metrics to compare: ``wanted`` (each must be in both tables), else every metric both tables hold."""
    if wanted:
        names = [spec.name for spec in parse_metrics(list(wanted))]
        missing = [n for n in names if n not in baseline.table.columns or n not in candidate.table.columns]
        if missing:
            raise DataError(f"metric(s) {', '.join(missing)} not in both runs' tables (baseline has "
                            f"{', '.join(baseline.metrics())}; candidate has {', '.join(candidate.metrics())})")
        return names
    theirs = set(candidate.metrics())
    names = [n for n in baseline.metrics() if n in theirs]
    if not names:
        raise DataError(f"{baseline.name} and {candidate.name} have no metric in common")
    return names


def compare_sides(baseline: Side, candidate: Side, metrics: Sequence[str], confidence: float = DEFAULT_CONFIDENCE,
                  resamples: int = DEFAULT_RESAMPLES, permutations: int = PERMUTATIONS,
                  seed: int = DEFAULT_SEED) -> Comparison:
    try:
        return compare(baseline.table, candidate.table, list(metrics), confidence, resamples, permutations, seed)
    except ValueError as exc:
        raise DataError(f"cannot compare {baseline.name} with {candidate.name}: {exc}") from None


# -- the report -----------------------------------------------------------------------------------------------


def verdict_summary(comparison: Comparison) -> str:
    counts = comparison.table["verdict"].value_counts()
    return ", ".join(f"{word} on {int(counts.get(word, 0))}" for word in (WORSE, BETTER, SAME))


def primary_metric(baseline: Side, candidate: Side, metrics: Sequence[str]) -> str:
    """The metric the question set's sensitivity is told for: the runs' ``metrics.primary`` when it was compared,
    else the first compared metric."""
    for side in (candidate, baseline):
        primary = side.run.data.params.get("metrics.primary")
        if primary in metrics:
            return str(primary)
    return metrics[0]


def sensitivity_text(baseline: Side, candidate: Side, comparison: Comparison, detect: Sequence[float] = ()) -> str:
    """What these questions can detect on the primary metric: the minimum detectable effect at 80% power (paired
    t approximation, two-sided, alpha = 1 - confidence) from the spread of the per-question differences, and how
    many questions the observed difference (and each ``detect`` difference) would need."""
    metrics = list(comparison.table.index)
    metric = primary_metric(baseline, candidate, metrics)
    shared = baseline.table.index.intersection(candidate.table.index, sort=False)
    d = (candidate.table.loc[shared, metric].astype(float) - baseline.table.loc[shared, metric].astype(float))
    if len(d) < 2:
        return ""
    found = sensitivity(d.to_numpy(), 1.0 - comparison.confidence)
    if found.sd == 0:
        return (f"Detectable difference on {metric}: the two runs agree on every question (no spread of differences "
                f"to size one from).")
    lines = [f"What these {found.n} questions can tell on {metric} (paired t approximation, two-sided alpha "
             f"{found.alpha:.2g}, {found.power:.0%} power): a difference of {found.mde:.4f} (standard deviation of "
             f"the per-question differences {found.sd:.4f})."]
    wanted = [abs(float(d.mean())), *(abs(x) for x in detect)]
    needs = []
    for i, difference in enumerate(wanted):
        if difference == 0:
            continue
        label = f"the observed {d.mean():+.4f}" if i == 0 else f"{difference:g}"
        n = found.needed(difference)
        needs.append(f"{label} would need {'more than 10,000,000' if n is None else f'{n:,}'} questions")
    if needs:
        lines.append("With the same spread: " + "; ".join(needs) + ".")
    return "\n".join(lines)


def report(baseline: Side, candidate: Side, comparison: Comparison, resamples: int, permutations: int,
           warnings: Sequence[str] = (), detect: Sequence[float] = ()) -> str:
    """The terminal text: who is compared, on which questions, one row per metric, and what the questions can
    detect on the primary metric (and how many questions each ``detect`` difference would need)."""
    level = f"{comparison.confidence:.0%}"
    shared = len(baseline.table.index.intersection(candidate.table.index))
    lines = []
    for label, side in (("Baseline", baseline), ("Candidate", candidate)):
        lines.append(f"{label:<10} {describe(side.run)} on {side.corpus}, corpus digest {side.corpus_digest}"
                     f"{side.overrides}")
        if side.rankings_from:  # not computed by rankscope: say where they were read (MLflow traces, a window)
            lines.append(f"{'':<10} {side.rankings_from}")
    lines += [f"WARNING: {w} (compared anyway)" for w in warnings]
    lines.append(f"{shared} questions in common; only in the baseline: {_listed(comparison.only_in_baseline)}; "
                 f"only in the candidate: {_listed(comparison.only_in_candidate)}")
    rows = [("metric", "baseline", "candidate", "difference", f"{level} interval", "p (Holm)", "verdict")]
    for metric, row in comparison.table.iterrows():
        rows.append((str(metric), f"{row.baseline:.4f}", f"{row.candidate:.4f}", f"{row.difference:+.4f}",
                     f"[{row.ci_low:+.4f}, {row.ci_high:+.4f}]", f"{row.p_holm:.4f}", str(row.verdict)))
    lines += ["", format_table(rows, align="lrrrlrl"), ""]
    lines.append(f"Verdict: {verdict_summary(comparison)} of {len(comparison.table)} metrics (candidate minus "
                 f"baseline; paired bootstrap over questions, {resamples:,} resamples; randomisation test, "
                 f"{permutations:,} permutations, Holm-adjusted across the metrics)")
    power = sensitivity_text(baseline, candidate, comparison, detect)
    if power:
        lines += ["", power]
    return "\n".join(lines)


def _listed(ids: Sequence[str]) -> str:
    if not ids:
        return "none"
    shown = ", ".join(map(str, ids[:MAX_LISTED]))
    return f"{len(ids)} ({shown}{', ...' if len(ids) > MAX_LISTED else ''})"


def record(client: MlflowClient, baseline: Side, candidate: Side, comparison: Comparison, resamples: int,
           permutations: int, seed: int, tags: Mapping[str, str] | None = None,
           gate_result: GateResult | None = None, source: str | None = None) -> str:
    """The comparison as an MLflow run of its own (``pipeline.tracking.comparisons``); recorded once. ``source``:
    the command that asked for it, as the user would type it again."""
    primary = primary_metric(baseline, candidate, list(comparison.table.index))
    shown = {"primary": primary_verdict(comparison, primary),
             "description": description(baseline, candidate, comparison, primary, gate_result, source)}
    return record_comparison(client, baseline, candidate, comparison, verdict_summary(comparison), resamples,
                             permutations, seed, tags, gate_result, source, shown)


def primary_verdict(comparison: Comparison, metric: str) -> str:
    """``ndcg@10: worse, -0.074 [-0.103, -0.044]``: the verdict on one metric, short enough for a column."""
    row = comparison.table.loc[metric]
    return f"{metric}: {row.verdict}, {row.difference:+.3f} [{row.ci_low:+.3f}, {row.ci_high:+.3f}]"


def _link(side: Side) -> str:
    run = side.run.info
    label = (run.run_name or side.name).replace("[", "(").replace("]", ")")
    return f"[{label}](#/experiments/{run.experiment_id}/runs/{run.run_id}?workflowType=machine_learning)"


def description(baseline: Side, candidate: Side, comparison: Comparison, primary: str,
                gate_result: GateResult | None = None, source: str | None = None) -> str:
    """The comparison run's description (Markdown): the verdict on the primary metric in words, the gate's
    decision, every metric's row, both runs linked, and the command."""
    level = f"{comparison.confidence:.0%}"
    shared = len(baseline.table.index.intersection(candidate.table.index))
    row = comparison.table.loc[primary]
    words = {WORSE: "worse than", BETTER: "better than", SAME: "indistinguishable from"}.get(str(row.verdict),
                                                                                          str(row.verdict))
    lines = [f"**{candidate.name}** (candidate) is **{words}** **{baseline.name}** (baseline) on {primary}, "
             f"{candidate.corpus}, {shared:,} questions in common: **{row.difference:+.3f}** "
             f"[{row.ci_low:+.3f}, {row.ci_high:+.3f}] ({level} paired bootstrap interval; Holm p "
             f"{row.p_holm:.4f}). Over {len(comparison.table)} metrics: {verdict_summary(comparison)}."]
    if gate_result is not None:
        lines.append(f"**Gate:** {gate_result.reason}")
    rows = [f"| metric | baseline | candidate | difference | {level} interval | p (Holm) | verdict |",
            "|---|---|---|---|---|---|---|"]
    for metric, r in comparison.table.iterrows():
        rows.append(f"| {metric} | {r.baseline:.3f} | {r.candidate:.3f} | {r.difference:+.3f} | "
                    f"[{r.ci_low:+.3f}, {r.ci_high:+.3f}] | {r.p_holm:.4f} | {r.verdict} |")
    lines.append("\n".join(rows))
    lines.append(f"Baseline: {_link(baseline)} · Candidate: {_link(candidate)}")
    if source:
        lines.append(f"Command: `{source}`")
    return "\n\n".join(lines)


def parse_list(text: str | None) -> list[str] | None:
    return [t.strip() for t in text.split(",") if t.strip()] if text else None
