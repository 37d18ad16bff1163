"""A question set from production traces, and the judgments already on them (``python -m pipeline.questions``).

**Questions.** Each trace's question (:func:`pipeline.traces.calls.question_of`), with personal data and secrets
masked (:mod:`pipeline.common.privacy`). *Exact duplicates* are questions with the same
:func:`~pipeline.traces.calls.question_key` (the masked text, case-folded, punctuation and spacing aside); *near
duplicates* are distinct questions whose character trigrams overlap by at least ``near`` (Jaccard similarity, 0.8 by
default; 1 keeps every distinct question). The most asked question of a group of near duplicates stands for it (the
earliest asked among equals); a question's id is ``q`` and 12 hex digits of the SHA-256 of its key, the same in every
export.

**Sampling.** ``uniform``: ``size`` of the distinct questions drawn at random (seeded); ``stratified`` by a trace tag:
each value of the tag (``(none)`` where a trace lacks it) gets a share of ``size`` proportional to its number of
distinct questions (largest remainders), or the same share (``equal``), drawn at random within it. A question's
stratum is its first trace's.

**Judgments** (:func:`judgments`) are read from the assessments on a question's traces (its exact duplicates only:
a near duplicate may be another question). Accepted: a Feedback or Expectation whose name is in ``names``
(:data:`JUDGMENT_NAMES` by default), on the retriever span or the trace, naming its document in ``metadata`` (under a
key of ``doc_id`` other than ``id``, then ``doc_uri``, ``doc_id`` or ``document_id``) or by its place in the span's
outputs (``chunk_index``, as MLflow's ``RetrievalRelevance`` scorer writes it); its value a bool (relevant or not), an
integer grade (a float that is one too), or ``yes``/``no`` (MLflow's judges). An Expectation
``expected_retrieved_context`` (MLflow's and Databricks' evaluation schema: a list of ``{"doc_uri": ...}`` or of ids)
makes each document it lists relevant (grade 1). The latest judgment of a document for a question wins; overridden
assessments, errors and other values are counted and left out.

**A judged document's id** is read as ``retriever=traces`` reads it (:func:`pipeline.traces.calls.document_id`, the
same ``doc_id`` setting and order): a document the trace's span listed is named by whatever the assessment used (its
place, its ``doc_uri``, its ``Document.id``) and judged under the id the ranking holds. So an application that keeps
MLflow's convention (``Document.id`` the corpus id, ``metadata.doc_uri`` the source's URL), judged by ``doc_uri`` as
MLflow's judges do, gives judgments on the corpus's ids. A name no listed document carries is taken as the id.
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from metrics.errors import InputError
from pipeline.common.privacy import mask
from pipeline.traces.calls import (
    DOCUMENT_ID,
    Problem,
    Reading,
    decoded,
    document_id,
    is_document,
    metadata_of,
    question_key,
    question_of,
)
from pipeline.tracking.traces import RETRIEVER, AssessmentRecord, TracedCall

NEAR = 0.8
GRAM = 3  # characters per shingle of the near-duplicate test
SAMPLING = ("uniform", "stratified")
ALLOCATION = ("proportional", "equal")
NO_STRATUM = "(none)"
JUDGMENT_NAMES = ("relevance", "retrieval_relevance", "expected_retrieved_context")
CONTEXT_NAME = "expected_retrieved_context"
DOCUMENT_KEYS = ("doc_uri", "doc_id", "document_id")
BLOCK = 256  # questions compared at a time in the near-duplicate test (a block of 256 x n similarities)


@dataclass
class Asked:
    """One trace's question: its masked text and key, its stratum, what its retriever spans listed (span id ->
    document ids in order, for judgments that name a document by its place), and the other names of those documents
    (span id -> name -> document id: a ``doc_uri``, a ``Document.id``, for judgments that name a document so)."""

    trace_id: str
    time_ms: int
    text: str
    key: str
    stratum: str
    listed: dict[str, list[str]] = field(default_factory=dict)
    assessments: list[AssessmentRecord] = field(default_factory=list)
    names: dict[str, dict[str, str]] = field(default_factory=dict)


@dataclass
class Question:
    """A distinct question: its id, masked text, the traces that asked it (exact duplicates) and those of the near
    duplicates it stands for."""

    id: str
    text: str
    key: str
    stratum: str
    asked: list[Asked]
    near: list[Asked] = field(default_factory=list)

    @property
    def first_ms(self) -> int:
        return min(a.time_ms for a in self.asked)

    @property
    def count(self) -> int:
        return len(self.asked) + len(self.near)


@dataclass
class Gathered:
    """What a set of traces gave: every question asked, the traces that gave none, the masking counts."""

    asked: list[Asked]
    problems: list[Problem]
    masked: Counter


def gather(calls: Iterable[TracedCall], reading: Reading, stratify: str | None = None) -> Gathered:
    """Each trace's masked question (whatever its state: a failed call was asked too), its stratum, its spans'
    document ids and its assessments."""
    asked, problems, masked = [], [], Counter()
    for call in calls:
        found = question_of(call, reading.question)
        if isinstance(found, Problem):
            problems.append(found)
            continue
        text, counts = mask(" ".join(found.split()))
        masked.update(counts)
        stratum = call.tags.get(stratify, NO_STRATUM) if stratify else NO_STRATUM
        listed, names = {}, {}
        for span in call.spans:
            if span.kind == RETRIEVER or span.name == reading.span:
                listed[span.span_id], names[span.span_id] = documents_listed(decoded(span.outputs), reading.doc_id)
        asked.append(Asked(call.trace_id, call.time_ms, text, question_key(text), stratum, listed,
                           list(call.assessments), names))
    return Gathered(asked, problems, masked)


def documents_listed(outputs: Any, places: Sequence[str]) -> tuple[list[str], dict[str, str]]:
    """The ids of a span's documents in order ('' where one has none), as :func:`pipeline.traces.calls.document_id`
    reads them (``places``: ``Reading.doc_id``); and every name those documents carry (``Document.id``, the metadata
    under ``places`` and :data:`DOCUMENT_KEYS`) -> the id, an id itself winning over another document's other name."""
    if not isinstance(outputs, list):
        return [], {}
    ids, names = [], {}
    keys = list(dict.fromkeys([*places, *DOCUMENT_KEYS]))
    for document in outputs:
        if not is_document(document):
            ids.append("")
            continue
        metadata = metadata_of(document)
        ident = document_id(document, places, metadata) or ""
        ids.append(ident)
        if ident:
            for key in keys:
                value = document.get("id") if key == DOCUMENT_ID else metadata.get(key)
                if isinstance(value, str | int) and not isinstance(value, bool) and value != "":
                    names.setdefault(str(value), ident)
    names.update((ident, ident) for ident in ids if ident)
    return ids, names


def question_id(key: str) -> str:
    return "q" + hashlib.sha256(key.encode("utf-8")).hexdigest()[:12]


def distinct(asked: Sequence[Asked], near: float = NEAR) -> tuple[list[Question], int, int]:
    """The distinct questions, most asked first (the earliest asked among equals); and how many exact and near
    duplicates were folded into them."""
    if not 0 < near <= 1:
        raise InputError(f"--near {near}: expected a similarity within (0, 1] (1: exact duplicates only)")
    groups: dict[str, list[Asked]] = {}
    for one in sorted(asked, key=lambda a: (a.time_ms, a.trace_id)):
        groups.setdefault(one.key, []).append(one)
    ordered = sorted(groups.values(), key=lambda g: (-len(g), g[0].time_ms, g[0].trace_id))
    questions = [Question(question_id(g[0].key), g[0].text, g[0].key, g[0].stratum, g) for g in ordered]
    exact = len(asked) - len(questions)
    if near >= 1 or len(questions) < 2:
        return questions, exact, 0
    keep = _greedy(_near_pairs([q.key for q in questions], near), len(questions))
    kept = []
    for i, question in enumerate(questions):
        if keep[i] == i:
            kept.append(question)
        else:
            questions[keep[i]].near.extend(question.asked)
    return kept, exact, len(questions) - len(kept)


def _grams(key: str) -> set[str]:
    padded = f" {key} "
    return {padded[i:i + GRAM] for i in range(max(1, len(padded) - GRAM + 1))}


def _near_pairs(keys: Sequence[str], near: float) -> list[tuple[int, int]]:
    """Pairs (i, j), i < j, whose trigram sets have a Jaccard similarity of at least ``near``: a sparse product, a
    block of rows at a time."""
    vocabulary: dict[str, int] = {}
    rows, cols = [], []
    for i, key in enumerate(keys):
        for gram in _grams(key):
            rows.append(i)
            cols.append(vocabulary.setdefault(gram, len(vocabulary)))
    matrix = sp.csr_matrix((np.ones(len(rows), dtype=np.float32), (rows, cols)), shape=(len(keys), len(vocabulary)))
    sizes = np.asarray(matrix.sum(axis=1)).ravel()
    pairs = []
    transposed = matrix.T.tocsc()
    for start in range(0, len(keys), BLOCK):
        block = (matrix[start:start + BLOCK] @ transposed).tocoo()
        i, j, shared = block.row + start, block.col, block.data
        upper = j > i
        i, j, shared = i[upper], j[upper], shared[upper]
        similar = shared / (sizes[i] + sizes[j] - shared) >= near
        pairs.extend(zip(i[similar].tolist(), j[similar].tolist()))
    return pairs


def _greedy(pairs: list[tuple[int, int]], n: int) -> list[int]:
    """Each question's keeper: itself when no earlier kept question is near it, else the first such (questions are
    in order of how often they were asked, so the most asked of near duplicates is kept)."""
    neighbours: dict[int, list[int]] = {}
    for i, j in pairs:
        neighbours.setdefault(j, []).append(i)
    keeper = list(range(n))
    for j in range(n):
        earlier = [i for i in sorted(neighbours.get(j, ())) if keeper[i] == i]
        if earlier:
            keeper[j] = earlier[0]
    return keeper


def sample(questions: Sequence[Question], size: int | None, rule: str = "uniform", allocation: str = "proportional",
           seed: int = 0) -> list[Question]:
    """``size`` questions by ``rule`` (all of them when ``size`` is None or not smaller), in order of first asking."""
    if rule not in SAMPLING:
        raise InputError(f"--sampling {rule}: expected {' or '.join(SAMPLING)}")
    if allocation not in ALLOCATION:
        raise InputError(f"--allocation {allocation}: expected {' or '.join(ALLOCATION)}")
    if size is not None and size < 1:
        raise InputError(f"--sample {size}: expected at least 1")
    if size is None or size >= len(questions):
        chosen = list(questions)
    elif rule == "uniform":
        picked = np.random.default_rng(seed).choice(len(questions), size, replace=False)
        chosen = [questions[i] for i in picked]
    else:
        chosen = _stratified(questions, size, allocation, np.random.default_rng(seed))
    return sorted(chosen, key=lambda q: (q.first_ms, q.id))


def shares(counts: dict[str, int], size: int, allocation: str) -> dict[str, int]:
    """How many questions each stratum gives: proportional to its count (or equal), by largest remainders, never
    more than it has; what a small stratum cannot give goes to the others the same way."""
    left, out = size, dict.fromkeys(counts, 0)
    while left > 0:
        open_ = {s: counts[s] - out[s] for s in counts if counts[s] > out[s]}
        if not open_:
            break
        weights = open_ if allocation == "proportional" else dict.fromkeys(open_, 1)
        total = sum(weights.values())
        exact = {s: left * w / total for s, w in weights.items()}
        given = {s: min(math.floor(v), open_[s]) for s, v in exact.items()}
        rest = left - sum(given.values())
        for s in sorted(exact, key=lambda s: (-(exact[s] - math.floor(exact[s])), s)):
            if rest <= 0:
                break
            if given[s] < open_[s]:
                given[s] += 1
                rest -= 1
        if not any(given.values()):
            break
        for s, n in given.items():
            out[s] += n
        left = size - sum(out.values())
    return out


def _stratified(questions: Sequence[Question], size: int, allocation: str,
                rng: np.random.Generator) -> list[Question]:
    strata: dict[str, list[Question]] = {}
    for q in questions:
        strata.setdefault(q.stratum, []).append(q)
    given = shares({s: len(qs) for s, qs in sorted(strata.items())}, size, allocation)
    chosen = []
    for stratum in sorted(strata):
        members = strata[stratum]
        picked = rng.choice(len(members), given[stratum], replace=False) if given[stratum] else []
        chosen += [members[i] for i in picked]
    return chosen


# -- judgments from assessments ---------------------------------------------------------------------------------


@dataclass
class Judged:
    """Judgments read from assessments: (question id, document id) -> (grade, time, source type, trace id), and
    what was left out, by reason."""

    grades: dict[tuple[str, str], tuple[int, int, str, str]] = field(default_factory=dict)
    left_out: Counter = field(default_factory=Counter)

    @property
    def sources(self) -> Counter:
        """How many of the judgments kept came from each source type (HUMAN, LLM_JUDGE, CODE)."""
        return Counter(source or "unknown" for _, _, source, _ in self.grades.values())

    def rows(self) -> list[tuple[str, str, int, str, str]]:
        """(question id, document id, grade, source type, trace id), sorted."""
        return sorted((q, d, g, source, trace) for (q, d), (g, _, source, trace) in self.grades.items())


def grade_of(value: Any) -> int | None:
    """A judgment's grade: a bool as 1/0, an integer (or a float that is one), ``yes``/``no``, a digit string."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        text = value.strip().lower()
        if text in ("yes", "true"):
            return 1
        if text in ("no", "false"):
            return 0
        if text.lstrip("-").isdigit():
            return int(text)
    return None


def judgments(questions: Sequence[Question], names: Sequence[str] = JUDGMENT_NAMES,
              sources: Sequence[str] | None = None, places: Sequence[str] = Reading.doc_id) -> Judged:
    """The judgments the questions' traces carry (see the module's docstring); ``places``: where a document's id is
    (``Reading.doc_id``, as the traces were gathered with)."""
    wanted = set(names)
    keys = list(dict.fromkeys([*(p for p in places if p != DOCUMENT_ID), *DOCUMENT_KEYS]))
    allowed = {s.upper() for s in sources} if sources else None
    found = Judged()
    for question in questions:
        for asked in question.asked:
            for a in asked.assessments:
                if a.name not in wanted:
                    continue
                if allowed is not None and a.source_type.upper() not in allowed:
                    found.left_out["other source"] += 1
                    continue
                if not a.valid:
                    found.left_out["overridden"] += 1
                    continue
                if a.failed:
                    found.left_out["an error, not a value"] += 1
                    continue
                for doc, grade in _graded(a, asked, found, places, keys):
                    key = (question.id, doc)
                    if key not in found.grades or found.grades[key][1] <= a.time_ms:
                        found.grades[key] = (grade, a.time_ms, a.source_type, asked.trace_id)
    return found


def _graded(a: AssessmentRecord, asked: Asked, found: Judged, places: Sequence[str],
            keys: Sequence[str]) -> list[tuple[str, int]]:
    """The (document id, grade) pairs one assessment gives."""
    spans = [a.span_id] if a.span_id in asked.listed else list(asked.listed)  # on the trace: any of its spans

    def named(value: Any) -> str:
        """A document as the assessment names it -> its id as the ranking holds it (see the module's docstring)."""
        text = str(value)
        for span in spans:
            if text in asked.names.get(span, {}):
                return asked.names[span][text]
        return text

    if a.name == CONTEXT_NAME and a.kind == "expectation":
        listed = a.value if isinstance(a.value, list) else None
        if listed is None:
            found.left_out["expected_retrieved_context not a list"] += 1
            return []
        docs = []
        for item in listed:
            doc = (next((item.get(k) for k in dict.fromkeys([*places, *DOCUMENT_KEYS]) if item.get(k) not in
                         (None, "")), None) if isinstance(item, dict) else item)
            if doc is None or str(doc) == "":
                found.left_out["no document named"] += 1
                continue
            docs.append((named(doc), 1))
        return docs
    grade = grade_of(a.value)
    if grade is None:
        found.left_out[f"value not a grade ({type(a.value).__name__})"] += 1
        return []
    doc = next((named(a.metadata[k]) for k in keys if a.metadata.get(k)), None)
    if doc is None and a.metadata.get("chunk_index", "").strip().lstrip("-").isdigit():
        listed = asked.listed.get(a.span_id or "") or (next(iter(asked.listed.values())) if len(asked.listed) == 1
                                                        else [])
        position = int(a.metadata["chunk_index"])
        if 0 <= position < len(listed) and listed[position]:
            doc = listed[position]
    if doc is None:
        found.left_out["no document named"] += 1
        return []
    return [(doc, grade)]
