"""What a tuning sweep reports at its end: the best trials, the chosen configuration, the tuned (and untuned)
figures on both splits side by side with the gain of tuning, as text, a table and the parent's metrics."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from metrics.comparison import compare
from pipeline.common.names import LOWER, TUNING_TABLE, TUNING_TEXT, UPPER
from pipeline.common.redact import redact_text
from pipeline.config.build import MetricPlan
from pipeline.job.context import short_value
from pipeline.reports.text import format_table, number

if TYPE_CHECKING:
    from pipeline.analysis.summary import SystemRun
    from pipeline.sweep.holdout import Best, Evaluated


TOP_TRIALS = 5


def _get(done: list[Evaluated], label: str, role: str) -> Evaluated | None:
    return next((e for e in done if e.label == label and e.role == role), None)


def _gains(done: list[Evaluated], plan: MetricPlan) -> dict[str, pd.DataFrame]:
    """Tuned minus untuned, paired over the questions of each split."""
    names = [s.name for s in plan.show]
    out = {}
    for role in ("tuning", "holdout"):
        tuned, untuned = _get(done, "tuned", role), _get(done, "untuned", role)
        if tuned is None or untuned is None:
            continue
        a, b = untuned.outcome.result.evaluation.per_question, tuned.outcome.result.evaluation.per_question
        out[role] = compare(a, b, names, plan.confidence, plan.resamples, seed=plan.seed).table
    return out


def tuning_report(title: str, plan: MetricPlan, trials: list[SystemRun], best: Best, done: list[Evaluated],
                  same_split: bool) -> str:
    """Best trials, the chosen configuration, and the tuned (and untuned) figures on both splits side by side."""
    primary = plan.primary
    tuned_here, tuned_there = _get(done, "tuned", "tuning"), _get(done, "tuned", "holdout")
    c = tuned_here.outcome.result.collection
    finished = [t for t in trials if t.finished]
    parts = [f"== {title}: {len(finished)} of {len(trials)} trials finished; objective {primary.name} on "
             f"{c.name}/{c.split} ({len(tuned_here.outcome.result.evaluation.per_question)} questions)"]
    level = f"{plan.confidence:.0%}"
    ranked = sorted(finished, key=lambda t: (-t.metrics.get(primary.mlflow_key, float("-inf")), t.job))
    rows = [("trial", "system", primary.name, f"{level} interval")]
    for t in ranked[:TOP_TRIALS]:
        m = t.metrics
        rows.append((str(t.job), t.name, number(m.get(primary.mlflow_key, float("nan"))),
                     f"[{number(m.get(primary.mlflow_key + LOWER, float('nan')))}, "
                     f"{number(m.get(primary.mlflow_key + UPPER, float('nan')))}]"))
    parts.append(f"Best trials by {primary.name} on {tuned_here.split}\n" + format_table(rows, align="rlrl"))
    chosen = " ".join(f"{k}={short_value(str(v))}" for k, v in best.params.items())
    again = tuned_here.outcome.result.intervals[primary.name].mean
    note = "" if abs(again - best.value) < 1e-9 else (
        f"\n(note: re-evaluated, it scores {again:.4f}; the optimiser saw {best.value:.4f}: the system is not "
        f"deterministic)")
    parts.append(f"Best configuration (the optimiser's choice): {chosen}{note}")
    columns = [e for e in (tuned_here, tuned_there, _get(done, "untuned", "tuning"), _get(done, "untuned", "holdout"))
               if e is not None]
    head = ("metric", *(f"{e.split}: {e.label}" + (" (held out)" if e.role == "holdout" else "") for e in columns))
    rows = [head]
    for spec in plan.show:
        cells = []
        for e in columns:
            iv = e.outcome.result.intervals[spec.name]
            cells.append(f"{iv.mean:.3f} [{iv.low:.3f}, {iv.high:.3f}]")
        rows.append((spec.name, *cells))
    parts.append(f"Tuned on {tuned_here.split}, evaluated once on {tuned_there.split}: mean [{level} interval]\n"
                 + format_table(rows, align="l" + "l" * len(columns)))
    gains = _gains(done, plan)
    if gains:
        rows = [("metric", *(f"{_get(done, 'tuned', role).split}" for role in gains))]
        for spec in plan.show:
            cells = []
            for table in gains.values():
                r = table.loc[spec.name]
                mark = " *" if r.ci_low > 0 or r.ci_high < 0 else ""
                cells.append(f"{r.difference:+.3f} [{r.ci_low:+.3f}, {r.ci_high:+.3f}]{mark}")
            rows.append((spec.name, *cells))
        parts.append("Tuned minus untuned, paired over questions (* = the interval excludes zero)\n"
                     + format_table(rows, align="l" + "l" * len(gains)))
    if same_split:
        parts.append(f"WARNING: tuned and reported on the same split ({tuned_there.split}, tune.allow_same_split): "
                     f"the 'held out' figure is optimistic.")
    else:
        parts.append(f"Report the {tuned_there.split} column: the {tuned_here.split} figure is optimistic, the "
                     f"configuration was chosen on it.")
    for t in trials:
        if not t.finished:
            parts.append(f"FAILED trial {t.job} ({t.name}): {t.error or t.status}")
    return "\n\n".join(parts)


def parent_metrics(plan: MetricPlan, best: Best, done: list[Evaluated]) -> dict[str, float]:
    """``tuned/holdout/ndcg_at_10`` (with its ``_ci_lower``, ``_ci_upper``), ``untuned/tuning/...``, ``gain/...``."""
    out = {f"tune/best_trial/{plan.primary.mlflow_key}": best.value}
    for e in done:
        for spec in plan.specs:
            iv = e.outcome.result.intervals[spec.name]
            key = f"{e.label}/{e.role}/{spec.mlflow_key}"
            out.update({key: iv.mean, key + LOWER: iv.low, key + UPPER: iv.high})
    for role, table in _gains(done, plan).items():
        for spec in plan.show:
            r = table.loc[spec.name]
            key = f"gain/{role}/{spec.mlflow_key}"
            out.update({key: r.difference, key + LOWER: r.ci_low, key + UPPER: r.ci_high})
    return out


def write_tuning(text: str, done: list[Evaluated], plan: MetricPlan, sweep_dir: Path) -> list[Path]:
    """The report and every evaluation's figures as a table, in the sweep folder (and logged to the parent)."""
    sweep_dir.mkdir(parents=True, exist_ok=True)
    report = sweep_dir / TUNING_TEXT
    report.write_text(redact_text(text) + "\n", encoding="utf-8")
    rows = [(e.label, e.role, e.split, spec.name, iv.mean, iv.low, iv.high)
            for e in done for spec in plan.specs for iv in [e.outcome.result.intervals[spec.name]]]
    table = sweep_dir / TUNING_TABLE
    pd.DataFrame(rows, columns=["config", "role", "split", "metric", "mean", "ci_low", "ci_high"]).to_csv(
        table, index=False)
    return [report, table]
