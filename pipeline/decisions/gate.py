"""The regression gate: compare a candidate run with the baseline and decide, in one line and an exit status.

Status 0: pass (the candidate is better, indistinguishable, or worse only within the tolerance); 1: a regression
(worse than the baseline by more than the tolerance, with the configured confidence); 2: the gate could not decide
(no such run, runs on different corpora, a metric missing, the store not answering).

Settings: ``conf/gate/<name>.yaml``, typed by ``pipeline.config.schema.GateConfig``. With ``adopt_first`` and a
``tag:KEY=VALUE`` baseline that no run carries yet, the candidate becomes the baseline and the gate passes.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from metrics.errors import InputError
from pipeline.common import commands
from pipeline.common.names import GATE_FILE, SAYS_GATE, TAG_GATE, TAG_GATE_REASON, TAG_OVERRIDES, TAG_SWEEP_PARENT
from pipeline.common.redact import redact_text
from pipeline.decisions.comparison import check_comparable, compare_sides, load_side, record, shared_metrics
from pipeline.decisions.gate_settings import check_settings
from pipeline.decisions.slices import slice_gate
from pipeline.tracking.client import MlflowClient, Run
from pipeline.tracking.comparisons import baseline_tag, promote
from pipeline.tracking.runs import Tracker
from pipeline.tracking.selectors import NoMatch, corpus_key, corpus_of, describe, metric_key, resolve
from pipeline.tracking.store import STORE_ERRORS, client_for, store_error, tracking_uri

SAYS = SAYS_GATE
EXIT_PASS, EXIT_REGRESSION, EXIT_ERROR = 0, 1, 2


@dataclass(frozen=True)
class GateOutcome:
    status: int  # EXIT_PASS, EXIT_REGRESSION or EXIT_ERROR
    line: str  # 'PASS: ...', 'REGRESSION: ...' or 'ERROR: ...'
    comparison_run: str | None = None

    @property
    def word(self) -> str:
        return {EXIT_PASS: "pass", EXIT_REGRESSION: "regression"}.get(self.status, "error")


def baseline_of(client: MlflowClient, experiment_id: str, candidate: Run, selector: str) -> Run:
    """The baseline of the candidate's data (the same digest, whatever its corpus was called); else of the corpus it
    names, whose data then differs: the comparison refuses that in one line rather than adopting a new baseline."""
    try:
        return resolve(client, experiment_id, selector, corpus=corpus_key(candidate))
    except NoMatch:
        return resolve(client, experiment_id, selector, corpus=corpus_of(candidate))


def run_gate(client: MlflowClient, experiment_id: str | None, candidate: Run, settings: Any,
             tags: Mapping[str, str] | None = None, source: str | None = None) -> GateOutcome:
    """Compare ``candidate`` with the run ``settings.baseline`` selects and decide; records the comparison (its
    source: ``source``, the command that ran the gate)."""
    try:
        metrics = check_settings(settings)
        try:
            baseline_run = baseline_of(client, experiment_id or candidate.info.experiment_id, candidate,
                                       str(settings.baseline))
        except NoMatch:
            if not (settings.adopt_first and str(settings.baseline).startswith("tag:")):
                raise
            load_side(client, candidate)  # only a run with a per-question table can become the baseline
            key, value = baseline_tag(str(settings.baseline))
            promote(client, candidate, (key, value))
            return GateOutcome(EXIT_PASS, f"PASS: no baseline yet (no run has {key}={value}): "
                                          f"{describe(candidate)} is now the baseline")
        if baseline_run.info.run_id == candidate.info.run_id:  # the baseline cannot regress against itself
            return GateOutcome(EXIT_PASS, f"PASS (warning: the candidate is the baseline itself, "
                                          f"{describe(candidate)}: nothing compared, nothing recorded)")
        baseline, side = load_side(client, baseline_run), load_side(client, candidate)
        check_comparable(baseline, side, bool(settings.allow_different_corpus))
        metrics = shared_metrics(baseline, side, metrics)
        comparison = compare_sides(baseline, side, metrics, float(settings.confidence), int(settings.resamples),
                                   int(settings.permutations), int(settings.seed))
        result = slice_gate(comparison, metrics, baseline, side, settings)
        run_id = record(client, baseline, side, comparison, int(settings.resamples), int(settings.permutations),
                        int(settings.seed), dict(tags or {}), gate_result=result, source=source)
    except InputError as exc:
        return GateOutcome(EXIT_ERROR, f"ERROR: {exc}")
    except STORE_ERRORS as exc:
        return GateOutcome(EXIT_ERROR, f"ERROR: the tracking store did not answer: {store_error(exc)}")
    who = f"{side.name} vs baseline {baseline.name} (run {baseline.run_id})"
    return GateOutcome(EXIT_PASS if result.passed else EXIT_REGRESSION, f"{result.reason} [{who}]", run_id)


def say(outcome: GateOutcome) -> None:
    """One line: a pass on stdout, a regression or an error on stderr (what cron mails and CI shows in red)."""
    line = f"{SAYS}: {redact_text(outcome.line)}".replace("\n", " ")
    print(line, file=sys.stdout if outcome.status == EXIT_PASS else sys.stderr, flush=True)


def sweep_candidate(systems: Sequence[Any], settings: Any) -> Any:
    """The sweep's system to gate: the best by the first gate metric, or the one named ``settings.candidate``."""
    if not systems:
        raise InputError("no job of the sweep finished: nothing to gate")
    wanted = str(settings.candidate)
    if wanted == "best":
        key = metric_key(str(settings.metrics[0]))
        scored = [s for s in systems if key in s.metrics]
        if not scored:
            raise InputError(f"no finished job logged {key}: cannot pick the best system for the gate")
        return max(scored, key=lambda s: (s.metrics[key], -s.job))
    named = [s for s in systems if s.name == wanted]
    if not named:
        raise InputError(f"gate.candidate {wanted!r} is not a finished system of the sweep (have: "
                         f"{', '.join(s.name for s in systems)})")
    return named[0]


def gate_sweep(client: MlflowClient, experiment_id: str, parent_run_id: str, systems: Sequence[Any],
               settings: Any, sweep_dir: Path, tags: Mapping[str, str] | None = None) -> GateOutcome:
    """The gate at the end of a sweep: pick the candidate, decide, say it, and leave it on the parent run."""
    try:
        chosen = sweep_candidate(systems, settings)
        overrides = client.get_run(parent_run_id).data.tags.get(TAG_OVERRIDES, "")
        source = commands.line(commands.module("pipeline", "-m", *overrides.split()))
        outcome = run_gate(client, experiment_id, resolve(client, experiment_id, chosen.run_id), settings,
                           {**(tags or {}), TAG_SWEEP_PARENT: parent_run_id}, source)
    except InputError as exc:
        outcome = GateOutcome(EXIT_ERROR, f"ERROR: {exc}")
    except STORE_ERRORS as exc:
        outcome = GateOutcome(EXIT_ERROR, f"ERROR: the tracking store did not answer: {store_error(exc)}")
    say(outcome)
    sweep_dir.mkdir(parents=True, exist_ok=True)
    (sweep_dir / GATE_FILE).write_text(redact_text(outcome.line) + "\n", encoding="utf-8")
    with suppress(*STORE_ERRORS):  # the line is printed and saved in the sweep folder anyway
        Tracker(client, parent_run_id).set_tags({TAG_GATE: outcome.word, TAG_GATE_REASON: outcome.line[:5000]})
    return outcome


def gate_single_run(configured_uri: str | None, launch_dir: Path, run_id: str, settings: Any,
                    tags: Mapping[str, str] | None = None) -> int:
    """``python -m pipeline gate=default`` (no sweep): the gate on the run just logged (in the store
    ``tracking.uri`` names, relative to ``launch_dir``); its exit status."""
    client = client_for(tracking_uri(configured_uri, launch_dir))
    try:
        candidate = resolve(client, None, run_id)
        overrides = candidate.data.tags.get(TAG_OVERRIDES, "")
        outcome = run_gate(client, None, candidate, settings, tags,
                           commands.line(commands.module("pipeline", *overrides.split())))
    except STORE_ERRORS as exc:
        outcome = GateOutcome(EXIT_ERROR, f"ERROR: the tracking store did not answer: {store_error(exc)}")
    say(outcome)
    return outcome.status
