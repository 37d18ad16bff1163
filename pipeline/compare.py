"""``python -m pipeline.compare BASELINE CANDIDATE``: is one run better, worse, or indistinguishable from another?

Each side is a run selector (``pipeline.tracking.selectors``: run id, run name, ``tag:baseline=true``, ``best:ndcg_at_10``,
``latest``). Both runs' per-question tables are read back from MLflow and aligned by question id; the runs must
have been measured on the same corpus and judgments (same digest) with the same evaluation settings, unless
``--allow-different-corpus``. For every metric: both means, the paired difference with its bootstrap interval,
the randomisation-test p-value Holm-adjusted across the metrics, and the verdict (``metrics.comparison``).

The comparison is recorded as an MLflow run of its own (tagged with both run ids, the table logged with
``log_table``), beside the candidate. ``--promote`` then makes the candidate the baseline: it moves the
``baseline=true`` tag (or the tag the BASELINE selector named), and the previous baseline keeps
``baseline/previous``, ``baseline/replaced_by`` and ``baseline/until`` tags.

Exit status: 0 compared (and promoted if asked); 1 promotion refused because the candidate is worse on some
metric (``--force`` promotes anyway); 2 a usage or data error (no such run, different corpora, no table).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd
from mlflow import MlflowClient
from mlflow.entities import Run
from mlflow.exceptions import MlflowException

from metrics.bootstrap import DEFAULT_CONFIDENCE, DEFAULT_RESAMPLES, DEFAULT_SEED
from metrics.comparison import BETTER, SAME, WORSE, Comparison, GateResult, compare
from metrics.errors import InputError
from metrics.spec import parse_metric, parse_metrics
from pipeline.common.redact import redact_text
from pipeline.job.results import PER_QUESTION_TABLE
from pipeline.reports.text import _format as format_table
from pipeline.tracking.records import read_table, store_error
from pipeline.tracking.runs import (
    TAG_CORPUS_DIGEST,
    TAG_KIND,
    TAG_OVERRIDES,
    TAG_SYSTEM,
    Tracker,
    run_location,
    tracking_uri,
)
from pipeline.tracking.selectors import SelectorError, describe, literal, resolve

PROG = "rankscope compare"
PERMUTATIONS = 10000
EXIT_OK, EXIT_REFUSED, EXIT_ERROR = 0, 1, 2

TAG_BASELINE_RUN = "rankscope.compare.baseline"
TAG_CANDIDATE_RUN = "rankscope.compare.candidate"
TAG_VERDICT = "rankscope.compare.verdict"
TAG_PROMOTED = "rankscope.compare.promoted"
TAG_DIGEST = "rankscope.compare.digest"
TAG_GATE = "rankscope.gate"
TAG_GATE_REASON = "rankscope.gate.reason"
COMPARISON_TABLE = "comparison.json"
ONE_SIDE_FILE = "questions_on_one_side.txt"
BASELINE_TAG = ("baseline", "true")
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
        return self.run.data.tags.get("rankscope.corpus") or self.run.data.params.get("corpus.name", "?")

    @property
    def overrides(self) -> str:
        """``, overrides: retriever.k1=0 ...`` when the run was made with any (they tell same-named runs apart)."""
        given = self.run.data.tags.get(TAG_OVERRIDES, "")
        return f", overrides: {given}" if given else ""

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
    with tempfile.TemporaryDirectory() as tmp:
        try:
            local = client.download_artifacts(run.info.run_id, PER_QUESTION_TABLE, tmp)
        except Exception:
            raise DataError(f"{describe(run)} has no per-question table ({PER_QUESTION_TABLE}): only runs of "
                            f"rankscope jobs can be compared") from None
        table = read_table(Path(local))
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


def report(baseline: Side, candidate: Side, comparison: Comparison, resamples: int, permutations: int,
           warnings: Sequence[str] = ()) -> str:
    """The terminal text: who is compared, on which questions, and one row per metric."""
    level = f"{comparison.confidence:.0%}"
    shared = len(baseline.table.index.intersection(candidate.table.index))
    lines = [f"{label:<10} {describe(side.run)} on {side.corpus}, corpus digest {side.corpus_digest}{side.overrides}"
             for label, side in (("Baseline", baseline), ("Candidate", candidate))]
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
    return "\n".join(lines)


def _listed(ids: Sequence[str]) -> str:
    if not ids:
        return "none"
    shown = ", ".join(map(str, ids[:MAX_LISTED]))
    return f"{len(ids)} ({shown}{', ...' if len(ids) > MAX_LISTED else ''})"


# -- recording and promotion ----------------------------------------------------------------------------------


def record(client: MlflowClient, baseline: Side, candidate: Side, comparison: Comparison, resamples: int,
           permutations: int, seed: int, tags: dict[str, str] | None = None,
           gate_result: GateResult | None = None) -> str:
    """The comparison as an MLflow run beside the candidate: both ids as tags, the table via ``log_table``.

    The same comparison (same runs, metrics, settings and gate decision) is recorded once: asked again (a
    resumed sweep, a repeated command) it returns the run that already holds it."""
    experiment_id = candidate.run.info.experiment_id
    digest = _digest([baseline.run_id, candidate.run_id, list(comparison.table.index), comparison.confidence,
                      resamples, permutations, seed, gate_result.reason if gate_result else None,
                      sorted((tags or {}).items())])
    for run in client.search_runs([experiment_id], f"tags.`{TAG_DIGEST}` = '{digest}'", max_results=10):
        if run.info.status == "FINISHED":
            return run.info.run_id
    run_tags = {
        **(tags or {}),
        TAG_KIND: "comparison",
        TAG_BASELINE_RUN: baseline.run_id, TAG_CANDIDATE_RUN: candidate.run_id,
        f"{TAG_BASELINE_RUN}.name": baseline.name, f"{TAG_CANDIDATE_RUN}.name": candidate.name,
        f"{TAG_BASELINE_RUN}.corpus_digest": str(baseline.corpus_digest),
        f"{TAG_CANDIDATE_RUN}.corpus_digest": str(candidate.corpus_digest),
        TAG_VERDICT: verdict_summary(comparison),
        TAG_DIGEST: digest,
    }
    if gate_result is not None:
        run_tags[TAG_GATE] = "pass" if gate_result.passed else "regression"
        run_tags[TAG_GATE_REASON] = gate_result.reason[:5000]
    tracker = Tracker.start(client, experiment_id, f"{candidate.name} vs {baseline.name}", run_tags)
    try:
        tracker.log_params({"confidence": comparison.confidence, "resamples": resamples,
                            "permutations": permutations, "seed": seed, "metrics": list(comparison.table.index)})
        values: dict[str, float] = {
            "questions/common": len(candidate.table.index.intersection(baseline.table.index)),
            "questions/only_in_baseline": len(comparison.only_in_baseline),
            "questions/only_in_candidate": len(comparison.only_in_candidate),
        }
        for metric, row in comparison.table.iterrows():
            key = parse_metric(str(metric)).mlflow_key
            for column in ("baseline", "candidate", "difference", "ci_low", "ci_high", "p_value", "p_holm"):
                values[f"{key}/{column}"] = float(row[column])
        tracker.log_metrics(values)
        tracker.log_table(comparison.table.reset_index(), COMPARISON_TABLE)
        if comparison.only_in_baseline or comparison.only_in_candidate:
            text = (f"only in the baseline ({baseline.run_id}):\n" + "\n".join(comparison.only_in_baseline)
                    + f"\n\nonly in the candidate ({candidate.run_id}):\n" + "\n".join(comparison.only_in_candidate))
            client.log_text(tracker.run_id, redact_text(text) + "\n", ONE_SIDE_FILE)
    except BaseException as exc:
        tracker.finish(error=f"{type(exc).__name__}: {exc}")
        raise
    tracker.finish()
    return tracker.run_id


def _digest(parts: list[object]) -> str:
    return hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()[:16]


def baseline_tag(selector: str) -> tuple[str, str]:
    """The tag that marks the baseline: the one a ``tag:KEY=VALUE`` selector names, else ``baseline=true``."""
    if selector.startswith("tag:") and "=" in selector:
        key, _, value = selector[4:].partition("=")
        return key, value
    return BASELINE_TAG


def promote(client: MlflowClient, candidate: Run, tag: tuple[str, str] = BASELINE_TAG) -> list[str]:
    """Make ``candidate`` the baseline of its experiment; returns the run ids that were the baseline before.

    The new baseline gets the tag (and ``KEY/since``, ``KEY/replaces``); each previous one loses it and keeps
    ``KEY/previous=true``, ``KEY/replaced_by`` and ``KEY/until``: the history stays searchable in MLflow.
    """
    key, value = tag
    experiment_id = candidate.info.experiment_id
    query = f"tags.`{key}` = {literal(value)}"
    previous = [r.info.run_id for r in client.search_runs([experiment_id], query, max_results=1000)
                if r.info.run_id != candidate.info.run_id]
    now = datetime.now(UTC).isoformat(timespec="seconds")
    client.set_tag(candidate.info.run_id, key, value)
    client.set_tag(candidate.info.run_id, f"{key}/since", now)
    if previous:
        client.set_tag(candidate.info.run_id, f"{key}/replaces", ",".join(previous))
    for run_id in previous:
        client.set_tag(run_id, f"{key}/previous", "true")
        client.set_tag(run_id, f"{key}/replaced_by", candidate.info.run_id)
        client.set_tag(run_id, f"{key}/until", now)
        client.delete_tag(run_id, key)
    return previous


# -- command line ---------------------------------------------------------------------------------------------


def open_store(uri_option: str | None, experiment: str | None) -> tuple[MlflowClient, str, str | None]:
    """The client, the URI (for messages) and the experiment's id (None when it does not exist)."""
    uri = tracking_uri(uri_option, Path.cwd())
    if uri.startswith("sqlite:///") and not Path(uri[len("sqlite:///"):]).is_file():
        raise InputError(f"no MLflow store at {uri} (give --tracking-uri, or run from the folder holding mlflow.db)")
    client = MlflowClient(tracking_uri=uri)
    found = client.get_experiment_by_name(experiment) if experiment else None
    return client, uri, found.experiment_id if found is not None else None


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m pipeline.compare", description=__doc__.split("\n\n")[0])
    p.add_argument("baseline", help="run id, run name, tag:KEY=VALUE, best:METRIC or latest")
    p.add_argument("candidate", help="run id, run name, tag:KEY=VALUE, best:METRIC or latest")
    add_store_options(p)
    p.add_argument("--metrics", help="comma-separated metrics to compare (default: all both runs have)")
    p.add_argument("--confidence", type=float, default=DEFAULT_CONFIDENCE)
    p.add_argument("--resamples", type=int, default=DEFAULT_RESAMPLES)
    p.add_argument("--permutations", type=int, default=PERMUTATIONS)
    p.add_argument("--seed", type=int, default=DEFAULT_SEED)
    p.add_argument("--allow-different-corpus", action="store_true",
                   help="compare runs on different corpora/judgments (on the questions they share)")
    p.add_argument("--promote", action="store_true", help="make the candidate the new baseline (moves the tag)")
    p.add_argument("--force", action="store_true", help="with --promote: promote even a candidate that is worse")
    p.add_argument("--no-record", action="store_true", help="do not record the comparison in MLflow")
    return p


def add_store_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--experiment", default="rankscope", help="where selectors look (default: rankscope)")
    p.add_argument("--tracking-uri", help="default: $MLFLOW_TRACKING_URI, else sqlite:///$PWD/mlflow.db")


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        if not 0 < args.confidence < 1 or args.resamples < 1 or args.permutations < 1:
            raise InputError("--confidence must be within (0, 1); --resamples and --permutations at least 1")
        client, uri, experiment_id = open_store(args.tracking_uri, args.experiment)
        baseline = load_side(client, resolve(client, experiment_id, args.baseline))
        candidate = load_side(client, resolve(client, experiment_id, args.candidate))
        warnings = check_comparable(baseline, candidate, args.allow_different_corpus)
        metrics = shared_metrics(baseline, candidate, parse_list(args.metrics))
        comparison = compare_sides(baseline, candidate, metrics, args.confidence, args.resamples, args.permutations,
                                   args.seed)
        print(report(baseline, candidate, comparison, args.resamples, args.permutations, warnings), flush=True)
        status = EXIT_OK
        promote_now = args.promote
        if args.promote and (comparison.table["verdict"] == WORSE).any() and not args.force:
            worse = ", ".join(comparison.table.index[comparison.table["verdict"] == WORSE])
            print(f"{PROG}: not promoted: the candidate is worse on {worse} (--force promotes it anyway)",
                  file=sys.stderr)
            status, promote_now = EXIT_REFUSED, False
        tags = {TAG_PROMOTED: "true"} if promote_now else {}
        if not args.no_record:
            run_id = record(client, baseline, candidate, comparison, args.resamples, args.permutations, args.seed,
                            tags)
            print("Recorded: " + run_location(uri, candidate.run.info.experiment_id, run_id))
        if promote_now:
            previous = promote(client, candidate.run, baseline_tag(args.baseline))
            key, value = baseline_tag(args.baseline)
            was = ", ".join(previous) or "no run"
            print(f"Promoted {describe(candidate.run)} to baseline ({key}={value}); previous baseline: {was}")
        return status
    except (InputError, SelectorError) as exc:
        print(f"{PROG}: {redact_text(str(exc))}".replace("\n", " "), file=sys.stderr)
        return EXIT_ERROR
    except (MlflowException, OSError) as exc:
        print(f"{PROG}: the tracking store did not answer: {store_error(exc)}", file=sys.stderr)
        return EXIT_ERROR


def parse_list(text: str | None) -> list[str] | None:
    return [t.strip() for t in text.split(",") if t.strip()] if text else None


if __name__ == "__main__":
    sys.exit(main())
