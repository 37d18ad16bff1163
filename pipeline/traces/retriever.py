"""The production retriever as a traced application ran it: ``retriever=traces`` ranks the corpus's questions with
the rankings its MLflow traces hold, and the run is scored, bootstrapped, diagnosed, compared and gated like any
other.

**Which traces.** The experiment ``experiment`` of the store ``tracking_uri`` (by default the store rankscope logs
to), request times from ``since`` (included) to ``until`` (excluded), traces named ``trace_name``, carrying every tag
of ``tags``, matching the MLflow filter ``filter``; ``sample`` of them drawn at random (seeded by ``seed``) when
set. How each trace gives a question and a ranking: :mod:`pipeline.traces.calls`.

**Which corpus question a trace answered.** By default the one whose text is the trace's question, compared as
:func:`pipeline.traces.calls.question_key` compares them (personal data masked as a question set from traces masks
it, case and spacing aside); with ``question_id`` (a path into the root span's inputs, or ``tag:NAME``), the one of
that id. When several traces answered one question, the latest is used (``repeated: first``: the earliest).

**What is counted, not hidden** (each a note of the run, one line each, and a row of ``traces.csv``): traces that
failed or give no ranking (:data:`pipeline.traces.calls.PROBLEMS`: a span that raised among them), traces whose span
returned no document, traces asking a question the corpus does not hold, questions answered again, corpus questions
no trace answered (they rank nothing and score 0, as a question missing from a run does), document ids the corpus does
not hold (kept in the ranking: unjudged, so not relevant). When most of the ids the traces name are not in the corpus,
the ids are read from the wrong place: the job stops there, in one line that names ``doc_id`` and shows an id received
beside one the corpus holds (the place that holds the corpus's ids, when a document has one).

**Reading** is shared with the store process when one runs (:func:`pipeline.tracking.traces.read_shared`).

**Chunks.** When the traces' documents point inside the corpus's documents (offsets in their metadata, as
LangChain's ``add_start_index`` writes them, or a ``page_content`` the document's text holds:
:func:`pipeline.traces.calls.chunk_offsets`), the rankings are of those chunks (``chunks: auto``; ``off`` reads
documents only): the job scores each document at its best chunk, and the span and budget measures read the chunks.

**Where it came from.** The run's params hold the settings above (the filter included); ``traces.csv`` (an artifact
of the run) lists every trace read, what became of it and which question it answered; the run's tag
``rankscope.rankings_from`` (shown by the job, ``pipeline.compare`` and the gate) says how many traces of which
experiment and window.
"""

from __future__ import annotations

import csv
import io
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from metrics.chunks import chunk_id
from metrics.errors import InputError, Note
from metrics.run import Run
from metrics.trec import run_from_columns
from pipeline.common.names import TRACES_FILE
from pipeline.traces.calls import (
    DOCUMENT_ID,
    PROBLEMS,
    Answer,
    Problem,
    Reading,
    decoded,
    is_document,
    metadata_of,
    moment,
    question_key,
    read_call,
    shown_time,
)
from retrievers.base import BuildContext, Documents, Retriever, _check_batch, select_rows
from retrievers.external import SHOWN, listing

REPEATED = ("latest", "first")
CHUNK_MODES = ("auto", "off")
# what became of a trace (traces.csv's status column), beside the problems' kinds
USED, SUPERSEDED, NOT_IN_CORPUS = "used", "answered_again", "not_in_corpus"


@dataclass
class TracedRetriever(Retriever):
    """Rankings read from an MLflow experiment's traces (see the module's docstring)."""

    experiment: str = ""
    tracking_uri: str | None = None
    since: str | None = None
    until: str | None = None
    trace_name: str | None = None
    tags: dict[str, str] = field(default_factory=dict)
    filter: str | None = None
    sample: int | None = None
    seed: int = 0
    question: str | None = None
    question_id: str | None = None
    span: str | None = None
    several: str = "first"
    doc_id: list[str] = field(default_factory=lambda: ["id", "doc_uri"])
    score: str | None = None
    repeated: str = "latest"
    chunks: str = "auto"  # auto: rank the chunks the documents point to, when they point inside a document; off
    name: str = "traces"

    @classmethod
    def from_config(cls, context: BuildContext, **keys: Any) -> TracedRetriever:
        """The store named (``tracking_uri``) or rankscope's own; every setting checked before any trace is read."""
        from pipeline.tracking.store import tracking_uri

        built = cls(**keys)
        if not str(built.experiment).strip():
            raise InputError("retriever.experiment: name the experiment of the traced application "
                             "(retriever.experiment=NAME)")
        built.tracking_uri = tracking_uri(built.tracking_uri, context.base)
        if built.repeated not in REPEATED:
            raise InputError(f"retriever.repeated={built.repeated}: expected {' or '.join(REPEATED)}")
        if built.chunks not in CHUNK_MODES:
            raise InputError(f"retriever.chunks={built.chunks}: expected {' or '.join(CHUNK_MODES)}")
        if built.sample is not None and built.sample < 1:
            raise InputError(f"retriever.sample={built.sample}: expected at least 1 (or null: every trace)")
        built.reading()  # several, doc_id
        now = int(time.time() * 1000)
        since, until = moment(built.since, now, "retriever.since"), moment(built.until, now, "retriever.until")
        if since is not None and until is not None and since >= until:
            raise InputError(f"retriever.since={built.since} is not before retriever.until={built.until}: the window "
                             f"is empty")
        built._window = (since, until)
        return built

    def reading(self) -> Reading:
        return Reading(self.question, self.question_id, self.span, self.several, tuple(self.doc_id), self.score)

    def query(self) -> Any:
        from pipeline.tracking.traces import TraceQuery

        since, until = getattr(self, "_window", (None, None))
        return TraceQuery(str(self.tracking_uri), str(self.experiment), since, until, self.trace_name,
                          dict(self.tags or {}), self.filter)

    def where(self) -> str:
        """The traces asked for, for messages: experiment, store, window, name, tags, filter."""
        since, until = getattr(self, "_window", (None, None))
        from pipeline.common.redact import redact_text

        parts = [f"experiment {self.experiment!r} of {redact_text(str(self.tracking_uri))}"]
        if since is not None or until is not None:
            parts.append(f"from {shown_time(since)} to {shown_time(until) if until is not None else 'now'}")
        if self.trace_name:
            parts.append(f"named {self.trace_name!r}")
        if self.tags:
            parts.append("tagged " + ", ".join(f"{k}={v}" for k, v in self.tags.items()))
        if self.filter:
            parts.append(f"filter {self.filter!r}")
        return ", ".join(parts)

    # -- reading the traces -----------------------------------------------------------------------------------

    def index(self, docs: Documents) -> TracedRetriever:
        from pipeline.tracking.traces import read_shared, trace_times

        query, reading = self.query(), self.reading()
        chosen = None
        if self.sample is not None:
            times = trace_times(query)
            self._matching = len(times)
            if len(times) > self.sample:
                picked = np.sort(np.random.default_rng(self.seed).choice(len(times), self.sample, replace=False))
                chosen = [times[i][0] for i in picked]
        self._answers: list[Answer] = []
        self._problems: list[Problem] = []
        self._located: Counter = Counter()  # chunks whose place in their document was odd: see notes()
        spans = 0
        for found in read_shared(query, self.span, chosen, read_call, reading):
            if isinstance(found, Answer):
                self._answers.append(found)
                spans += found.spans > 1
            else:
                self._problems.append(found)
        self._several = spans
        self._read = len(self._answers) + len(self._problems)
        if not hasattr(self, "_matching"):
            self._matching = self._read
        if self._read == 0:
            raise InputError(f"no trace matches: {self.where()} (retriever.since, until, trace_name, tags, filter): "
                             f"nothing to rank")
        if not self._answers:
            raise InputError(f"none of the {self._read} trace(s) of {self.where()} gives a ranking: "
                             + "; ".join(self._problem_lines(full=False)))
        self._known = set(docs.doc_ids)
        self._check_ids(docs)
        self._by_key: dict[str, list[int]] | None = None
        self._status: dict[int, tuple[str, str]] = {}  # answer's place -> (status, question id)
        self._unanswered: list[str] = []
        self._answered_again: list[str] = []
        self._entries = self._ranked_entries(docs)
        self.doc_ids = np.array(sorted({ident for found in self._entries for ident, _ in found}), dtype=object)
        return self

    @property
    def ranks_chunks(self) -> bool:
        """Whether the rankings are of chunks (ids :func:`metrics.chunks.chunk_id`): the traces' documents point inside
        the corpus's documents."""
        return getattr(self, "_ranks_chunks", False)

    def _ranked_entries(self, docs: Documents) -> list[list[tuple[str, float]]]:
        """Each answer's ranking as the run holds it, ``(id, score)`` best first: chunk ids when some document points
        inside a corpus document (its offsets, or its ``page_content`` found in the document's text), else document
        ids; an id listed again keeps its first place."""
        texts = dict(zip(docs.doc_ids, docs.doc_texts))
        located = [[self._locate(d, o, c, texts) for d, o, c in zip(a.docs, a.offsets, a.contents)]
                   for a in self._answers] if self.chunks == "auto" else []
        self._ranks_chunks = any(span is not None and span != (0, len(texts[d]))
                                 for a, found in zip(self._answers, located) for d, span in zip(a.docs, found))
        self._chunks_dropped: list[str] = []
        entries = []
        for n, answer in enumerate(self._answers):
            ids: dict[str, float] = {}
            for i, (doc, score) in enumerate(zip(answer.docs, answer.scores)):
                if not self._ranks_chunks:
                    ids.setdefault(doc, score)
                elif doc not in texts:  # no text to measure a chunk of
                    self._chunks_dropped.append(doc)
                else:
                    start, end = located[n][i] or (0, len(texts[doc]))
                    ids.setdefault(chunk_id(doc, start, end), score)
            entries.append(list(ids.items()))
        return entries

    def _locate(self, doc: str, offsets: tuple[int | None, int | None], content: str | None,
                texts: dict[str, str]) -> tuple[int, int] | None:
        """Where a retrieved document lies in the corpus document ``doc``: its offsets when they fit the text (a
        text they do not reproduce is counted), else its ``page_content`` where the text holds it (the first of
        several places, counted); None when neither says."""
        text = texts.get(doc)
        if text is None:
            return None
        start, end = offsets
        if start is not None and 0 <= start < end <= len(text):
            if content is not None and text[start:end] != content:
                self._located["offsets_mismatch"] += 1
            return start, end
        if start is not None:
            self._located["offsets_outside"] += 1
        if not content:
            return None
        place = text.find(content)
        if place < 0:
            self._located["not_found"] += 1
            return None
        if text.find(content, place + 1) >= 0:
            self._located["ambiguous"] += 1
        return place, place + len(content)

    def _key(self, answer: Answer) -> str:
        return answer.question_id if self.question_id else (answer.key or question_key(answer.question))

    def _check_ids(self, docs: Documents) -> None:
        """Stop when most of the document ids the traces name are not in the corpus: every figure would be 0, and
        the cause is where the ids are read from (``doc_id``), not the retriever."""
        known = self._known
        named = sum(len(a.docs) for a in self._answers)
        unknown = [d for a in self._answers for d in a.docs if d not in known]
        if not named or 2 * len(unknown) <= named:
            return
        places = ", ".join(self.doc_id)
        example = str(next(iter(docs.doc_ids), ""))
        found = self._where_corpus_ids_are(unknown[0], example)
        if found is not None:
            place, value = found
            shown = "Document.id" if place == DOCUMENT_ID else f"metadata.{place}"
            said = (f"a trace names {unknown[0]!r}, and the same document's {shown} is {value!r}, an id the corpus "
                    f"holds: retriever.doc_id=[{place}]")
        else:
            said = (f"a trace names {unknown[0]!r}, the corpus holds ids such as {example!r}: name where a document "
                    f"holds the corpus's id (retriever.doc_id=[KEY, ...]: id is Document.id, any other name a key of "
                    f"its metadata)")
        raise InputError(f"{len(unknown):,} of the {named:,} document ids the traces retrieved are not in the corpus, "
                         f"as read by retriever.doc_id=[{places}] (the first of them a document has); {said}")

    def _where_corpus_ids_are(self, received: str, example: str, traces: int = 20) -> tuple[str, str] | None:
        """The place (``id``, or a metadata key) of the retrieved documents that holds corpus ids for most of them,
        and the value it holds in a document that named ``received``: read again from a few traces."""
        from pipeline.tracking.traces import read_calls

        which = [a.trace_id for a in self._answers if a.docs][:traces]
        hits: Counter = Counter()
        seen: Counter = Counter()
        beside: dict[str, str] = {}
        for call in read_calls(self.query(), self.span, which):
            for span in call.spans:
                outputs = decoded(span.outputs)
                for document in outputs if isinstance(outputs, list) else ():
                    if not is_document(document):
                        continue
                    places = {DOCUMENT_ID: document.get("id"), **metadata_of(document)}
                    named = any(str(v) == received for v in places.values() if v is not None)
                    for place, value in places.items():
                        if isinstance(value, bool) or not isinstance(value, str | int) or value == "":
                            continue
                        seen[place] += 1
                        if str(value) in self._known:
                            hits[place] += 1
                            if named:
                                beside.setdefault(place, str(value))
        best = max(hits, key=lambda place: (hits[place] / seen[place], hits[place]), default=None)
        if best is None or 2 * hits[best] <= seen[best]:
            return None
        return best, beside.get(best, example)

    def rank(self, query_ids: Sequence[str], texts: Sequence[str], depth: int = 100) -> Run:
        _check_batch(query_ids, texts)
        if self._by_key is None:
            self._by_key, self._keys = {}, {}
            for place, answer in enumerate(self._answers):
                key = self._key(answer)
                self._by_key.setdefault(key, []).append(place)
                self._keys[answer.question] = key  # a corpus question of the same text has the same key
        q: list[str] = []
        d: list[str] = []
        s: list[float] = []
        keys = self._keys
        for qid, text in zip(query_ids, texts):
            if self.question_id:
                key = str(qid)
            else:
                key = keys.get(text)
                if key is None:
                    key = question_key(text)
            places = self._by_key.get(key)
            if not places:
                self._unanswered.append(str(qid))
                continue
            ordered = sorted(places, key=lambda p: (self._answers[p].time_ms, self._answers[p].trace_id))
            use = ordered[-1] if self.repeated == "latest" else ordered[0]
            if len(ordered) > 1:
                self._answered_again.append(str(qid))
            for place in ordered:
                if self._status.get(place, ("",))[0] != USED:
                    self._status[place] = (USED if place == use else SUPERSEDED, str(qid))
            entries = self._entries[use]
            q += [str(qid)] * len(entries)
            d += [ident for ident, _ in entries]
            s += [score for _, score in entries]
        run = run_from_columns(q, d, s, self.name)
        return select_rows(run, query_ids, depth, self.name)

    # -- what the job reports ---------------------------------------------------------------------------------

    def source(self) -> str:
        used = sum(1 for status, _ in self._status.values() if status == USED)
        sampled = f" (a sample of {self._read} of {self._matching}, seed {self.seed})" if self.sample else ""
        return (f"rankings from {used} MLflow trace(s) of {self._read} read{sampled}: {self.where()}; each trace and "
                f"what became of it in {TRACES_FILE}")

    def _problem_lines(self, full: bool = True) -> list[str]:
        lines = []
        kinds = Counter(p.kind for p in self._problems)
        for kind, count in kinds.items():
            first = next(p for p in self._problems if p.kind == kind)
            ids = [p.trace_id for p in self._problems if p.kind == kind]
            lines.append(f"{count} {PROBLEMS[kind]} ({first.detail})" + (f": {listing(ids)}" if full else ""))
        return lines

    def notes(self) -> list[str]:
        found: list[str] = []
        for kind, count in Counter(p.kind for p in self._problems).items():
            first = next(p for p in self._problems if p.kind == kind)
            ids = [p.trace_id for p in self._problems if p.kind == kind]
            found.append(Note(f"{count} trace(s) {PROBLEMS[kind]} (first: {first.trace_id}, {first.detail}): "
                              f"{listing(ids)} (not used)", f"traces_{kind}", count, ids[:SHOWN]))
        outside = [a.trace_id for i, a in enumerate(self._answers) if i not in self._status]
        if outside:
            found.append(Note(f"{len(outside)} trace(s) ask a question the corpus does not hold (matched by "
                              f"{'question id' if self.question_id else 'text'}): {listing(outside)} (not used; "
                              f"{TRACES_FILE} lists them)", "traces_not_in_corpus", len(outside), outside[:SHOWN]))
        if self._answered_again:
            ids = self._answered_again
            found.append(Note(f"{len(ids)} question(s) were answered by several traces: {listing(ids)} (the "
                              f"{self.repeated} used)", "questions_traced_again", len(ids), ids[:SHOWN]))
        if self._unanswered:
            ids = self._unanswered
            found.append(Note(f"{len(ids)} corpus question(s) no trace answered: {listing(ids)} (they rank nothing, "
                              f"and score 0)", "questions_not_traced", len(ids), ids[:SHOWN]))
        if self._several:
            which = self.span or "RETRIEVER"
            found.append(Note(f"{self._several} trace(s) have several {which} spans: the {self.several} to start "
                              f"was used (retriever.span names one, retriever.several picks first or last)",
                              "traces_several_spans", self._several))
        used = [self._answers[i] for i, (status, _) in sorted(self._status.items()) if status == USED]
        empty = [a.trace_id for a in used if a.listed == 0]
        if empty:
            which = self.span or "RETRIEVER"
            found.append(Note(f"{len(empty)} trace(s) used have a {which} span that returned no document: "
                              f"{listing(empty)} (their questions rank nothing, and score 0)", "traces_empty_ranking",
                              len(empty), empty[:SHOWN]))
        unnamed = sum(a.unnamed for a in used)
        if unnamed:
            found.append(Note(f"{unnamed} retrieved document(s) have none of {', '.join(self.doc_id)} for an id "
                              f"(dropped; retriever.doc_id names where the id is)", "documents_without_id", unnamed))
        unknown = list(dict.fromkeys(d for a in used for d in a.docs if d not in self._known))
        if unknown:
            kept = ("dropped: a chunk of a document the corpus does not hold has no text to measure"
                    if self.ranks_chunks else "kept in the ranking: unjudged, so not relevant")
            found.append(Note(f"the traces name {len(unknown)} document id(s) that are not in the corpus: "
                              f"{listing(unknown)} ({kept})", "traces_unknown_document", len(unknown),
                              unknown[:SHOWN]))
        found.extend(self._chunk_notes())
        return found

    def _chunk_notes(self) -> list[Note]:
        """What reading the chunks' places found odd, one note per kind (counted over every trace read)."""
        said = {"offsets_mismatch": "have offsets whose text is not their page_content (the offsets used)",
                "offsets_outside": "have offsets outside their document (their page_content looked for instead)",
                "not_found": "have a page_content their document does not hold (ranked as the whole document)",
                "ambiguous": "have a page_content their document holds more than once (its first place used)"}
        return [Note(f"{count} retrieved chunk(s) {said[kind]}", f"traces_chunks_{kind}", count)
                for kind, count in self._located.items() if count]

    def files(self) -> dict[str, bytes]:
        """``traces.csv``: every trace read, its request time, what became of it, the question it answered and how
        many documents its span listed."""
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(["trace_id", "time", "status", "query_id", "span_id", "documents"])
        rows = []
        for i, answer in enumerate(self._answers):
            status, qid = self._status.get(i, (NOT_IN_CORPUS, ""))
            rows.append((answer.time_ms, answer.trace_id, status, qid, answer.span_id, len(answer.docs)))
        for problem in self._problems:
            rows.append((problem.time_ms, problem.trace_id, problem.kind, "", "", ""))
        for when, trace_id, status, qid, span_id, count in sorted(rows):
            writer.writerow([trace_id, shown_time(when), status, qid, span_id, count])
        return {TRACES_FILE: out.getvalue().encode("utf-8")}

    def question_tags(self) -> dict[str, dict[str, str]]:
        """Each answered question's trace tags (``app_version`` ...; MLflow's own ``mlflow.*`` left out): what
        ``metrics.slices`` may slice by."""
        return {qid: {k: v for k, v in self._answers[i].tags.items() if not k.startswith("mlflow.")}
                for i, (status, qid) in self._status.items() if status == USED}

    def traces(self) -> tuple[str | None, list[str]]:
        """The store of the traces and the ids of those whose rankings the run holds."""
        return str(self.tracking_uri), [self._answers[i].trace_id for i, (status, _) in sorted(self._status.items())
                                        if status == USED]
