"""A question set's folder: made from traces, its judgments read again from the traces' assessments, and judgments
written back onto the traces (the three subcommands of ``python -m pipeline.questions``).

The folder holds ``questions.jsonl`` (``id``, ``text`` masked, ``stratum``, ``asked``, ``first_asked``,
``last_asked``: what ``corpus=files`` reads with its default columns), ``question_traces.csv`` (each question's
traces: its exact duplicates, and the near duplicates it stands for), ``judgments.csv`` (``query_id``, ``doc_id``,
``grade``, ``source``, ``trace_id``: the judgments ``corpus=files`` reads, when the traces carry any) and
``question_set.json`` (where the set came from).
"""

from __future__ import annotations

import csv
import io
import json
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from metrics.errors import InputError
from pipeline.common import commands
from pipeline.common.names import (
    JUDGMENTS_FILE,
    PROG,
    QUESTION_SET_FILE,
    QUESTION_TRACES_FILE,
    QUESTIONS_FILE,
)
from pipeline.common.privacy import RULES
from pipeline.common.redact import redact_text
from pipeline.data.collection import texts_digest
from pipeline.traces.calls import Reading, moment, shown_time
from pipeline.traces.sampling import (
    JUDGMENT_NAMES,
    NEAR,
    Asked,
    Judged,
    Question,
    distinct,
    gather,
    judgments,
    sample,
)
from pipeline.tracking.traces import Judgment, TraceQuery, log_judgments, read_calls

EXACT, NEAR_DUPLICATE = "exact", "near"


@dataclass(frozen=True)
class Settings:
    """What ``from-traces`` was asked: the traces (as ``retriever=traces`` takes them), how questions are read,
    deduplicated and sampled, and which judgments are accepted."""

    experiment: str
    tracking_uri: str
    since: str | None = None
    until: str | None = None
    trace_name: str | None = None
    tags: tuple[tuple[str, str], ...] = ()
    filter: str | None = None
    question: str | None = None
    span: str | None = None
    doc_id: tuple[str, ...] = ("id", "doc_uri")
    near: float = NEAR
    size: int | None = None
    sampling: str = "uniform"
    stratify: str | None = None
    allocation: str = "proportional"
    seed: int = 0
    names: tuple[str, ...] = JUDGMENT_NAMES
    sources: tuple[str, ...] = ()
    name: str | None = None
    record_experiment: str = "rankscope"  # the set is recorded in "<this> questions"

    def query(self, now_ms: int) -> TraceQuery:
        since, until = moment(self.since, now_ms, "--since"), moment(self.until, now_ms, "--until")
        if since is not None and until is not None and since >= until:
            raise InputError(f"--since {self.since} is not before --until {self.until}: the window is empty")
        return TraceQuery(self.tracking_uri, self.experiment, since, until, self.trace_name, dict(self.tags),
                          self.filter)

    def reading(self) -> Reading:
        return Reading(self.question, None, self.span, "first", self.doc_id, None)


def from_traces(settings: Settings, folder: Path, now_ms: int, record: bool = True) -> str:
    """Make the set in ``folder`` (and record it in MLflow); returns what to print."""
    if settings.sampling == "stratified" and not settings.stratify:
        raise InputError("--sampling stratified needs --stratify TAG: the trace tag whose values are the strata")
    query = settings.query(now_ms)
    reading = settings.reading()
    gathered = gather(read_calls(query, settings.span), reading, settings.stratify)
    where = _where(settings, query)
    read = len(gathered.asked) + len(gathered.problems)
    if read == 0:
        raise InputError(f"no trace matches: {where} (--since, --until, --trace-name, --tag, --filter): no question")
    if not gathered.asked:
        first = gathered.problems[0]
        raise InputError(f"none of the {read} trace(s) of {where} has a question ({first.detail}; --question names "
                         f"its path in the root span's inputs)")
    everything, exact, near = distinct(gathered.asked, settings.near)
    chosen = sample(everything, settings.size, settings.sampling, settings.allocation, settings.seed)
    judged = judgments(chosen, settings.names, settings.sources or None, settings.doc_id)
    folder.mkdir(parents=True, exist_ok=True)
    files = [_write_questions(folder, chosen), _write_traces(folder, chosen)]
    if judged.grades:
        files.append(_write_judgments(folder, judged))
    else:
        (folder / JUDGMENTS_FILE).unlink(missing_ok=True)
    ids, texts = [q.id for q in chosen], [q.text for q in chosen]
    digest = texts_digest(ids, texts)
    name = settings.name or f"{settings.experiment}-questions"
    counts = {"traces_read": read, "traces_without_question": len(gathered.problems),
              "questions_distinct": len(everything), "duplicates_exact": exact, "duplicates_near": near,
              "questions_sampled": len(chosen), "judgments": len(judged.grades),
              "questions_judged": len({q for q, _ in judged.grades}),
              **{f"masked_{rule}": gathered.masked.get(rule, 0) for rule in RULES}}
    described = {**_described(settings, query), "digest": digest, "name": name, "counts": counts,
                 "left_out_judgments": dict(judged.left_out)}
    (folder / QUESTION_SET_FILE).write_text(json.dumps(described, indent=1) + "\n", encoding="utf-8")
    files.append(folder / QUESTION_SET_FILE)
    masked = ", ".join(f"{gathered.masked[r]} {r}" for r in RULES if gathered.masked.get(r)) or "nothing"
    lines = [f"{PROG} questions: {read} trace(s) of {where}",
             f"{len(everything)} distinct question(s) ({exact} exact and {near} near duplicate(s) folded, "
             f"similarity >= {settings.near:g}); {_sampled(settings, len(chosen), len(everything))}",
             f"masked: {masked}", _judged_line(judged, len(chosen))]
    if gathered.problems:
        lines.append(f"note: {len(gathered.problems)} trace(s) have no question ({gathered.problems[0].detail}): "
                     f"left out")
    lines.append("wrote " + ", ".join(str(f) for f in files))
    if record:
        from pipeline.tracking.question_set_versions import record_question_set

        frame = pd.DataFrame({"id": ids, "text": texts, "stratum": [q.stratum for q in chosen],
                              "asked": [q.count for q in chosen]})
        params = {k: v for k, v in described.items() if k not in ("counts", "left_out_judgments", "digest", "name")}
        location = record_question_set(settings.tracking_uri, settings.record_experiment, name, frame, digest,
                                        str(folder.resolve()), params, counts, files)
        lines.append(f"recorded as MLflow dataset {name!r} (digest {digest}): {location}")
    lines.append("measure on it: " + commands.line(commands.module(
        "pipeline", "corpus=files", "corpus.name=" + name, "corpus.documents.path=YOUR_DOCUMENTS",
        f"corpus.questions.path={folder / QUESTIONS_FILE}",
        *([f"corpus.judgments.path={folder / JUDGMENTS_FILE}"] if judged.grades else []),
        "retriever=traces", f"retriever.experiment={settings.experiment}")))
    return "\n".join(lines)


def _where(settings: Settings, query: TraceQuery) -> str:
    parts = [f"experiment {settings.experiment!r} of {redact_text(settings.tracking_uri)}"]
    if query.since_ms is not None or query.until_ms is not None:
        parts.append(f"from {shown_time(query.since_ms)} to "
                     f"{shown_time(query.until_ms) if query.until_ms is not None else 'now'}")
    if settings.trace_name:
        parts.append(f"named {settings.trace_name!r}")
    if settings.tags:
        parts.append("tagged " + ", ".join(f"{k}={v}" for k, v in settings.tags))
    if settings.filter:
        parts.append(f"filter {settings.filter!r}")
    return ", ".join(parts)


def _sampled(settings: Settings, chosen: int, total: int) -> str:
    if settings.size is None or chosen == total:
        return f"all {chosen} kept"
    rule = (f"stratified by tag {settings.stratify!r}, {settings.allocation} shares" if settings.sampling ==
            "stratified" else "uniform")
    return f"{chosen} sampled ({rule}, seed {settings.seed})"


def _judged_line(judged: Judged, questions: int) -> str:
    judged_questions = len({q for q, _ in judged.grades})
    text = (f"judgments on the traces: {len(judged.grades)} for {judged_questions} of {questions} question(s)"
            + (f" (sources: {', '.join(f'{n} {s}' for s, n in judged.sources.items())})" if judged.sources else ""))
    if judged.left_out:
        text += "; left out: " + ", ".join(f"{n} {why}" for why, n in judged.left_out.items())
    return text


def _described(settings: Settings, query: TraceQuery) -> dict[str, Any]:
    return {"experiment": settings.experiment, "tracking_uri": redact_text(settings.tracking_uri),
            "since": shown_time(query.since_ms) if query.since_ms is not None else None,
            "until": shown_time(query.until_ms) if query.until_ms is not None else None,
            "trace_name": settings.trace_name, "tags": dict(settings.tags), "filter": settings.filter,
            "question": settings.question, "span": settings.span, "doc_id": list(settings.doc_id),
            "near": settings.near, "sample": settings.size, "sampling": settings.sampling,
            "stratify": settings.stratify, "allocation": settings.allocation, "seed": settings.seed,
            "judgment_names": list(settings.names), "judgment_sources": list(settings.sources)}


def _write_questions(folder: Path, chosen: Sequence[Question]) -> Path:
    path = folder / QUESTIONS_FILE
    with path.open("w", encoding="utf-8") as handle:
        for q in chosen:
            times = [a.time_ms for a in (*q.asked, *q.near)]
            handle.write(json.dumps({"id": q.id, "text": q.text, "stratum": q.stratum, "asked": q.count,
                                     "first_asked": shown_time(min(times)), "last_asked": shown_time(max(times))},
                                    ensure_ascii=False) + "\n")
    return path


def _write_traces(folder: Path, chosen: Sequence[Question]) -> Path:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["query_id", "trace_id", "time", "duplicate"])
    for q in chosen:
        for kind, asked in ((EXACT, q.asked), (NEAR_DUPLICATE, q.near)):
            for a in sorted(asked, key=lambda a: (a.time_ms, a.trace_id)):
                writer.writerow([q.id, a.trace_id, shown_time(a.time_ms), kind])
    path = folder / QUESTION_TRACES_FILE
    path.write_text(out.getvalue(), encoding="utf-8")
    return path


def _write_judgments(folder: Path, judged: Judged) -> Path:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["query_id", "doc_id", "grade", "source", "trace_id"])
    writer.writerows(judged.rows())
    path = folder / JUDGMENTS_FILE
    path.write_text(out.getvalue(), encoding="utf-8")
    return path


# -- a set made earlier: its traces read again --------------------------------------------------------------------


def _described_set(folder: Path) -> dict[str, Any]:
    path = folder / QUESTION_SET_FILE
    if not path.is_file():
        raise InputError(f"no question set here (no {QUESTION_SET_FILE}): make one with from-traces", folder)
    return json.loads(path.read_text(encoding="utf-8"))


def _traces_of(folder: Path) -> dict[str, list[str]]:
    """Each question's traces that asked it exactly (question_traces.csv)."""
    path = folder / QUESTION_TRACES_FILE
    if not path.is_file():
        raise InputError(f"no {QUESTION_TRACES_FILE} in the question set", folder)
    found: dict[str, list[str]] = defaultdict(list)
    with path.open(encoding="utf-8", newline="") as handle:
        for row in csv.DictReader(handle):
            if row["duplicate"] == EXACT:
                found[row["query_id"]].append(row["trace_id"])
    return found


def _asked_again(folder: Path, uri: str | None) -> tuple[dict[str, Any], list[Question]]:
    """The set's questions with their traces read again (assessments and spans as they are now)."""
    described = _described_set(folder)
    uri = uri or described["tracking_uri"]
    if "***" in uri:
        raise InputError("the set's store URI was recorded masked: give --tracking-uri")
    traces = _traces_of(folder)
    reading = Reading(described.get("question"), None, described.get("span"), "first",
                      tuple(described.get("doc_id") or ("id", "doc_uri")), None)
    query = TraceQuery(uri, described["experiment"])
    wanted = [t for ids in traces.values() for t in ids]
    by_trace: dict[str, Asked] = {a.trace_id: a for a in gather(read_calls(query, reading.span, wanted), reading).asked}
    questions = []
    for qid, ids in traces.items():
        asked = [by_trace[t] for t in ids if t in by_trace]
        if asked:
            questions.append(Question(qid, asked[0].text, asked[0].key, asked[0].stratum, asked))
    return {**described, "tracking_uri": uri}, questions


def refresh_judgments(folder: Path, uri: str | None, names: Sequence[str] | None,
                      sources: Sequence[str] | None) -> str:
    """Read the judgments on the set's traces again (a labeling session has added some) into judgments.csv."""
    described, questions = _asked_again(folder, uri)
    judged = judgments(questions, names or described.get("judgment_names") or JUDGMENT_NAMES,
                       sources or described.get("judgment_sources") or None,
                       tuple(described.get("doc_id") or Reading.doc_id))
    lines = [_judged_line(judged, len(_traces_of(folder)))]
    if judged.grades:
        lines.append(f"wrote {_write_judgments(folder, judged)}")
    return "\n".join(lines)


def write_back(folder: Path, judgments_path: Path, uri: str | None, name: str, assessor: str) -> str:
    """Each judgment of ``judgments_path`` (query_id, doc_id, grade) as an expectation on the retriever span of every
    trace that asked the question: what the MLflow trace view then shows."""
    from pipeline.data.files import Judgments

    described, questions = _asked_again(folder, uri)
    qrels = Judgments(path=str(judgments_path)).read("--judgments")
    by_id = {q.id: q for q in questions}
    unknown: Counter = Counter()
    written: list[Judgment] = []
    for qid, doc, grade in zip(qrels.query_ids.tolist(), qrels.doc_ids.tolist(), qrels.grades.tolist()):
        question = by_id.get(str(qid))
        if question is None:
            unknown[str(qid)] += 1
            continue
        for asked in question.asked:
            span_id, listed = next(iter(asked.listed.items()), (None, []))
            position = listed.index(doc) if doc in listed else None
            written.append(Judgment(asked.trace_id, span_id, str(doc), int(grade), position))
    count = log_judgments(described["tracking_uri"], written, name, assessor)
    text = (f"{PROG} questions: wrote {count} expectation(s) named {name!r} (source HUMAN, {assessor!r}) on the "
            f"traces of {len(by_id)} question(s) of experiment {described['experiment']!r}")
    if unknown:
        text += f"; {sum(unknown.values())} judgment(s) name {len(unknown)} question(s) not in the set (not written)"
    return text
