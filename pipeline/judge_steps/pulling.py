"""Pull: the assessors' grades (from Label Studio or sheets) checked against the pool, their agreement, one grade per
pair by the settings' rule (a tie settled by an adjudication round's grade, else by ``ties``), and the next qrels
version written whole into the pool's folder, then logged to MLflow as a dataset (after the version it follows, when
the chain starts with the runs' own qrels). A version whose assessors agree less than ``agreement.minimum`` is
refused, unless a third assessor settled every tie or ``--force`` takes it anyway.

A span pool's pull (:func:`build_span_version`) reads the assessors' marks checked against the documents (a mark that
cannot be used set aside, one line each), measures their agreement on the grades (kappa, alpha) and on the
highlights (character-level F1 and IoU), merges the highlights character by character, and writes a span judgment
version: its ``qrels.tsv`` has ``start end`` columns (a job reads it back as the same judgments), ``spans.tsv``,
``highlights.csv`` (every assessor's, as read) and ``set_aside.csv`` beside the rest."""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd

from metrics.errors import InputError
from metrics.spans import spans_bytes
from pipeline.common.names import (
    ADJUDICATIONS_FILE,
    ANNOTATIONS_FILE,
    CONTRADICTIONS_FILE,
    DISAGREEMENTS_FILE,
    HIGHLIGHTS_FILE,
    QRELS_BEIR,
    QRELS_TREC,
    SET_ASIDE_FILE,
    SPANS_FILE,
    TAG_DOCUMENTS_DIGEST,
    TAG_QUESTIONS_DIGEST,
    VERSION_TEXT,
)
from pipeline.judge_steps.adjudication import settled
from pipeline.judge_steps.saved import SavedPool
from pipeline.judging_maths.agreement import ADJUDICATED, KEY, LOWER, MAJORITY, Agreement, agreement, merge
from pipeline.judging_maths.scale import Scale
from pipeline.judging_maths.span_agreement import SpanAgreement, merge_spans, span_agreement
from pipeline.judging_maths.spans import Checked
from pipeline.judging_maths.versions import (
    Version,
    beir_span_text,
    beir_text,
    frame,
    next_span_version,
    next_version,
    span_frame,
    trec_text,
)
from pipeline.tracking import judgments as tracked
from pipeline.tracking.client import MlflowClient

VERSIONS = "versions"  # under a pool's folder: one folder per qrels version, named by its digest
SHOWN = 10
SHOWN_ASIDE = 20  # marks set aside listed by pull (all of them in set_aside.csv)


@dataclass
class Pulled:
    annotations: pd.DataFrame  # the assessors' grades (an adjudication round's apart)
    merged: pd.DataFrame  # one grade per pair: query_id, doc_id, grade, assessors, tied, adjudicated, open
    agreement: Agreement | None
    version: Version
    rule: str
    ties: str = LOWER
    adjudications: pd.DataFrame = field(default_factory=pd.DataFrame)  # the round's grades, as read
    forced: bool = False  # taken although its assessors agree less than the minimum (--force)
    span_agreement: SpanAgreement | None = None  # a span pool's: character-level agreement of the highlights
    checked: Checked | None = None  # a span pool's marks, checked against the documents (some set aside)
    problems: list[str] = field(default_factory=list)  # tasks that could not be read (a task without a question)

    @property
    def spans(self) -> bool:
        return self.checked is not None

    @property
    def tied(self) -> int:
        return int(self.merged["tied"].sum())

    @property
    def adjudicated(self) -> int:
        return int(self.merged["adjudicated"].sum())

    @property
    def assessors(self) -> list[str]:
        return sorted(self.annotations["assessor"].astype(str).unique().tolist())

    @property
    def judged_at(self) -> str:
        when = [w for w in self.annotations["when"].astype(str) if w]
        return max(when) if when else ""


def build_version(saved: SavedPool, annotations: pd.DataFrame, scale: Scale, rule: str = MAJORITY,
                  override: bool = False, ties: str = LOWER, adjudications: pd.DataFrame | None = None) -> Pulled:
    """The next version from the pool's base and ``annotations`` (each pair checked to be the pool's); a tie settled
    by ``adjudications`` (the round's grades) where they hold the pair, else by ``ties``."""
    if annotations.empty:
        raise InputError(f"no pair of the pool in {saved.folder} is graded yet: nothing to pull")
    keys = saved.keys
    stray = [(q, d) for q, d in zip(annotations["query_id"], annotations["doc_id"]) if (q, d) not in keys]
    if stray:
        q, d = stray[0]
        raise InputError(f"{len(stray)} annotation(s) grade pairs not in the pool of {saved.folder}, e.g. question "
                         f"{q!r} and document {d!r}: nothing written")
    several = annotations.groupby(KEY)["assessor"].nunique()
    agree = agreement(annotations, scale.grades) if (several >= 2).any() else None
    rounds = adjudications if adjudications is not None else pd.DataFrame(columns=annotations.columns)
    merged = merge(annotations, rule, ties, settled(rounds, rule))
    return Pulled(annotations, merged, agree, next_version(saved.base(), merged, override), rule, ties, rounds)


def build_span_version(saved: SavedPool, checked: Checked, problems: list[str], scale: Scale, rule: str = MAJORITY,
                       override: bool = False, ties: str = LOWER,
                       adjudications: tuple[pd.DataFrame, pd.DataFrame] | None = None, level: int = 1) -> Pulled:
    """A span pool's next version from the checked marks: agreement on grades and on highlights, the highlights merged
    character by character (a tie settled by ``adjudications``, a round's highlights and grades, where they judge the
    pair), the base's judgments and spans plus the new ones."""
    annotations = checked.assessments
    if annotations.empty:
        aside = len(checked.set_aside) + len(problems)
        first = (checked.lines() + problems)[:1]
        raise InputError(f"no pair of the pool in {saved.folder} is judged yet" + (
            f" ({aside} mark(s) or task(s) not used, e.g. {first[0]})" if first else "") + ": nothing to pull")
    several = annotations.groupby(KEY)["assessor"].nunique()
    shared = bool((several >= 2).any())
    agree = agreement(annotations, scale.grades) if shared else None
    spans_agree = span_agreement(checked.highlights, annotations, level) if shared else None
    merged, merged_spans = merge_spans(checked.highlights, annotations, rule, ties, scale.low, adjudications)
    version = next_span_version(saved.base(), saved.base_spans(), merged, merged_spans, override)
    rounds = adjudications[1] if adjudications is not None else pd.DataFrame(columns=annotations.columns)
    return Pulled(annotations, merged, agree, version, rule, ties, rounds, span_agreement=spans_agree,
                  checked=checked, problems=list(problems))


def check_agreement(pulled: Pulled, measure: str, minimum: float, force: bool, adjudicate: str) -> None:
    """Refuse a version whose assessors agree less than ``minimum`` on ``measure`` while some of their ties are left
    to a rule, with the count of pairs they graded differently; ``force`` takes it anyway (noted in the version).
    ``adjudicate`` is the command that starts an adjudication round."""
    found = pulled.agreement
    if found is None or not found.below(measure, minimum):
        return
    left = pulled.tied - pulled.adjudicated
    if left == 0:
        return  # every tie was settled by a person
    if force:
        pulled.forced = True
        return
    differ = len(found.disagreements)
    raise InputError(f"the assessors agree too little for a rule to merge their grades: {found.name(measure)} "
                     f"{found.figure(measure):.3f} is below {minimum:g} (agreement.minimum, --min-agreement) over "
                     f"{found.shared} pairs graded by two or more, {differ} of them graded differently, {left} left "
                     f"tied by the {pulled.rule} rule (ties: {pulled.ties}): have a third assessor settle them "
                     f"({adjudicate}), or take the version anyway (--force); nothing written")


def version_text(pulled: Pulled, saved: SavedPool) -> str:
    v, counts = pulled.version, pulled.version.counts()
    kind = "span judgment version" if pulled.spans else "qrels version"
    evidence = (f"; {counts['spans']} spans, {counts['evidence_characters']} characters of evidence"
                if pulled.spans else "")
    lines = [f"{kind} {v.digest} (parent {v.parent_digest}) of {saved.meta['label']}: {counts['judgments']} "
             f"judgments, {counts['relevant']} at grade 1 or more, over {counts['questions']} questions{evidence}",
             f"new: {len(pulled.merged)} pairs graded ({counts['added']} added, {counts['confirmed']} confirmed, "
             f"{counts['contradicted']} contradicting the parent's grade) by {', '.join(pulled.assessors)}; "
             f"{len(saved.pairs) - len(pulled.merged)} of the pool's {len(saved.pairs)} pairs not graded yet"]
    if pulled.agreement is not None:
        lines += pulled.agreement.lines()
        if pulled.span_agreement is not None:
            lines += pulled.span_agreement.lines()
        per = "character by character " if pulled.spans else ""
        lines.append(f"merged {per}by the {pulled.rule} rule; {_ties_line(pulled)}")
        if pulled.forced:
            lines.append("taken although the assessors agree less than the minimum (--force)")
        listed = _disagreements(pulled)
        shown = listed.head(SHOWN)
        if pulled.span_agreement is not None:
            lines += [f"  {r.query_id} {r.doc_id}: {r.grades}; IoU {_iou(r.iou)}; {r.highlights}"
                      for r in shown.itertuples()]
        else:
            lines += [f"  {r.query_id} {r.doc_id}: {r.grades}" for r in shown.itertuples()]
        more = len(listed) - len(shown)
        if more > 0:
            lines.append(f"  ... and {more} more ({DISAGREEMENTS_FILE})")
    c = v.contradictions
    if len(c):
        kept = "the new grade replaces it (--override)" if v.overridden else "the parent's grade is kept (--override "\
               "takes the new one)"
        lines.append(f"{len(c)} new grade(s) contradict the parent version's; {kept}:")
        lines += [f"  {r.query_id} {r.doc_id}: was {r.old}, now graded {r.new}" for r in c.head(SHOWN).itertuples()]
    if pulled.checked is not None:
        unused = pulled.problems + pulled.checked.lines()
        if unused:
            lines.append(f"{len(pulled.checked.set_aside)} mark(s) set aside, {len(pulled.problems)} task(s) not "
                         f"read, {len(pulled.checked.notes)} overlap(s) read as one:")
            lines += [f"  {line}" for line in unused[:SHOWN_ASIDE]]
            if len(unused) > SHOWN_ASIDE:
                lines.append(f"  ... and {len(unused) - SHOWN_ASIDE} more ({SET_ASIDE_FILE})")
    return "\n".join(lines)


def _disagreements(pulled: Pulled) -> pd.DataFrame:
    """The pairs the assessors judged differently: by grade, or (a span pool) by grade or highlight."""
    if pulled.span_agreement is not None:
        return pulled.span_agreement.disagreements
    return pulled.agreement.disagreements if pulled.agreement is not None else pd.DataFrame()


def _iou(value: float) -> str:
    return "n/a" if value != value else f"{value:.2f}"


def _ties_line(pulled: Pulled) -> str:
    """How the pairs the rule left tied were settled."""
    tied, by_person = pulled.tied, pulled.adjudicated
    if not tied:
        return "no pair left tied"
    by_rule = tied - by_person
    said = [f"{by_person} settled by adjudication"] if by_person else []
    if by_rule:
        said.append(f"{by_rule} waiting for adjudication" if pulled.ties == ADJUDICATED else
                    f"{by_rule} to the {pulled.ties} grade")
    return f"{tied} pair(s) left tied: {', '.join(said)}"


def write_version(pulled: Pulled, saved: SavedPool, text: str) -> Path:
    """The version's files (TREC and BEIR qrels, every annotation, disagreements, contradictions, what pull said) in
    ``<pool>/versions/<digest>``, made in a temporary folder and moved into place whole."""
    v = pulled.version
    target = saved.folder / VERSIONS / v.digest
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".partial-") as tmp:
        work = Path(tmp)
        (work / QRELS_TREC).write_text(trec_text(v.qrels), encoding="utf-8")
        if v.spans is not None:
            (work / QRELS_BEIR).write_text(beir_span_text(v.qrels, v.spans), encoding="utf-8")
            (work / SPANS_FILE).write_bytes(spans_bytes(v.spans))
        else:
            (work / QRELS_BEIR).write_text(beir_text(v.qrels), encoding="utf-8")
        pulled.annotations.to_csv(work / ANNOTATIONS_FILE, index=False)
        if pulled.checked is not None:
            pulled.checked.highlights.to_csv(work / HIGHLIGHTS_FILE, index=False)
            aside = pulled.checked.set_aside
            problems = pd.DataFrame({"where": [p.split(": ", 1)[0] for p in pulled.problems], "reason": [
                p.split(": ", 1)[-1] for p in pulled.problems]})
            if len(aside) or len(problems):
                pd.concat([aside, problems], ignore_index=True).to_csv(work / SET_ASIDE_FILE, index=False)
        listed = _disagreements(pulled)
        if len(listed):
            listed.to_csv(work / DISAGREEMENTS_FILE, index=False)
        if len(pulled.adjudications):
            pulled.adjudications.to_csv(work / ADJUDICATIONS_FILE, index=False)
        if len(v.contradictions):
            v.contradictions.to_csv(work / CONTRADICTIONS_FILE, index=False)
        (work / VERSION_TEXT).write_text(text + "\n", encoding="utf-8")
        if target.exists():
            shutil.rmtree(target)
        work.rename(target)
        work.mkdir()  # for the context manager to remove
    return target


def version_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.is_file())


def log_version(client: MlflowClient, experiment: str, uri: str, pulled: Pulled, saved: SavedPool,
                target: Path) -> tuple[str, str]:
    """Log the version written in ``target`` as a dataset of the judgments experiment, with its counts, agreement,
    assessors and date (the runs' own qrels first, when the chain starts there). Returns the experiment's id and
    the version's run id."""
    experiment_id = tracked.judgments_experiment(client, experiment, uri)
    tags = {TAG_DOCUMENTS_DIGEST: saved.meta["documents_digest"], TAG_QUESTIONS_DIGEST: saved.meta["questions_digest"]}
    v = pulled.version
    parent = saved.base()
    if tracked.version_run(client, experiment_id, v.parent_digest) is None:  # the chain starts with the runs' own
        with tempfile.TemporaryDirectory() as tmp:
            first = Path(tmp) / QRELS_TREC
            first.write_text(trec_text(parent), encoding="utf-8")
            files, counts = [first], {"judgments": len(parent), "questions": len(parent.judged_queries())}
            data = frame(parent)
            if v.parent_spans is not None and len(v.parent_spans):
                (Path(tmp) / QRELS_BEIR).write_text(beir_span_text(parent, v.parent_spans), encoding="utf-8")
                files.append(Path(tmp) / QRELS_BEIR)
                counts["spans"] = len(v.parent_spans)
                data = span_frame(parent, v.parent_spans)
            tracked.log_version(client, experiment_id, data, digest=v.parent_digest, parent="",
                                corpus=saved.meta["label"], tags=tags, counts=counts, assessors=[], judged_at="",
                                files=files, source=str(saved.folder))
    counts: dict[str, float] = dict(v.counts())
    counts.update({"tied": pulled.tied, "adjudicated": pulled.adjudicated})
    if pulled.agreement is not None:
        counts.update({"agreement_alpha": pulled.agreement.alpha, "agreement_exact": pulled.agreement.exact,
                       "agreement_forced": float(pulled.forced)})
        if pulled.agreement.kappa is not None:
            counts.update({"agreement_kappa": pulled.agreement.kappa,
                           "agreement_weighted_kappa": pulled.agreement.weighted_kappa or float("nan")})
    if pulled.span_agreement is not None:
        found = pulled.span_agreement
        counts.update({"agreement_span_f1": found.f1, "agreement_span_iou": found.iou,
                       "agreement_span_mean_iou": found.mean_iou})
    if pulled.checked is not None:
        counts.update({"set_aside": len(pulled.checked.set_aside) + len(pulled.problems)})
    data = span_frame(v.qrels, v.spans) if v.spans is not None else frame(v.qrels)
    run_id = tracked.log_version(client, experiment_id, data, digest=v.digest, parent=v.parent_digest,
                                 corpus=saved.meta["label"], tags=tags, counts=counts, assessors=pulled.assessors,
                                 judged_at=pulled.judged_at or datetime.now(UTC).isoformat(timespec="seconds"),
                                 files=version_files(target), source=str(target))
    return experiment_id, run_id
