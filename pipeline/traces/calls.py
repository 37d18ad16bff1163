"""One traced call read as a question and a ranking: pure rules over the plain records of
:mod:`pipeline.tracking.traces` (no MLflow here).

- **The question** is the root span's input: the input itself when it is a string, else the last user message of
  ``messages`` (a chat request), else the only string among the inputs' values (``answer(question, k=5)``);
  ``question`` names a path into the inputs instead (``query``, ``messages.-1.content``: keys, and list positions
  counted from 0, or from the end when negative).
- **The ranking** is the outputs of one span: the ``RETRIEVER`` span, or the span named ``span``. A trace with
  several (a multi-hop application) gives the ranking of the first to start (the retrieval made with the user's
  question), or of the last with ``several: last``; such traces are counted.
- **A document's id** is the first of ``doc_id`` that it has (:func:`document_id`): ``id`` is ``Document.id``, any
  other name a key of its ``metadata`` (``doc_uri`` by default: MLflow's own convention). A document without one is
  dropped, and counted. Judgments read from assessments name documents by the same rule
  (:mod:`pipeline.traces.sampling`).
- **Its score** is ``metadata[score]`` when ``score`` is named, else ``1 / rank``: the span's order.
- **Where it points inside its document** (a chunk): ``metadata.start_index`` (LangChain's ``add_start_index``) or
  ``metadata.start``, and ``metadata.end_index`` or ``metadata.end`` (else the start plus the length of its
  ``page_content``); without offsets, its ``page_content`` is looked for in the document's text when the ranking is
  read (:mod:`pipeline.traces.retriever`). Two chunks of one document are two entries of a ranking.

What cannot be read (a failed trace, no question, no such span, a span that raised, outputs that are not documents, a
score that is not a number) is a :class:`Problem`: the trace is not used, and counted by kind. A span that returned
``[]`` is a ranking, empty: the job says so.
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from metrics.errors import InputError
from pipeline.common.privacy import masked
from pipeline.tracking.traces import RETRIEVER, SpanRecord, TracedCall

SEVERAL = ("first", "last")
DOCUMENT_ID = "id"  # in ``doc_id``: Document.id itself; any other name is a key of the document's metadata
TAG_PATH = "tag:"  # a question id read from a trace tag (``question_id: tag:qid``)
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([mhdw])\s*$")
_PUNCTUATION = re.compile(r"[\W_]+")
_UNITS = {"m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000}

# what a trace that gives no ranking is counted as (a job logs each count as system/notes_traces_<kind>)
FAILED, NO_QUESTION, NO_SPAN = "failed", "no_question", "no_span"
RAISED, NOT_DOCUMENTS, BAD_SCORE = "span_raised", "not_documents", "bad_score"
PROBLEMS = {
    FAILED: "did not finish OK",
    NO_QUESTION: "have no question where it was looked for",
    NO_SPAN: "have no span to rank with",
    RAISED: "have a span that raised, which the application caught",
    NOT_DOCUMENTS: "have a span whose outputs are not documents",
    BAD_SCORE: "have a document whose score is not a number",
}


def moment(text: str | None, now_ms: int, key: str) -> int | None:
    """A window's bound in ms since the epoch: an ISO date or time (UTC unless it says otherwise), or a duration
    back from now (``30m``, ``24h``, ``7d``, ``2w``); None when not given."""
    if text is None or str(text).strip() in ("", "null", "None"):
        return None
    text = str(text).strip()
    found = _DURATION.match(text)
    if found:
        return now_ms - int(float(found.group(1)) * _UNITS[found.group(2)])
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise InputError(f"{key}={text!r}: expected an ISO date or time (2026-12-04, 2026-12-04T09:30) or a "
                         f"duration back from now (30m, 24h, 7d, 2w)") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return int(when.timestamp() * 1000)


def shown_time(ms: int | None) -> str:
    """A time for messages: ``2026-12-04 09:30:00 UTC``."""
    if ms is None:
        return "any time"
    return (datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=ms)).strftime("%Y-%m-%d %H:%M:%S UTC")


def question_key(text: str) -> str:
    """What two questions must share to be the same question: the text with personal data and secrets masked
    (:mod:`pipeline.common.privacy`, so a masked question set matches the traces it came from), Unicode-normalised
    (NFKC), case-folded, punctuation read as spacing and spacing collapsed (``How much?`` is ``how much``)."""
    return " ".join(_PUNCTUATION.sub(" ", unicodedata.normalize("NFKC", masked(text)).casefold()).split())


@dataclass(frozen=True)
class Reading:
    """How a trace is read (see the module's docstring)."""

    question: str | None = None
    question_id: str | None = None  # a path into the inputs, or ``tag:NAME``: match corpus questions by id
    span: str | None = None
    several: str = "first"
    doc_id: Sequence[str] = ("id", "doc_uri")
    score: str | None = None

    def __post_init__(self) -> None:
        if self.several not in SEVERAL:
            raise InputError(f"retriever.several={self.several}: expected {' or '.join(SEVERAL)}")
        if not self.doc_id:
            raise InputError("retriever.doc_id: name at least one place of a document's id (id, doc_uri ...)")


@dataclass
class Answer:
    """A trace that gives a ranking: its question (and the question's id, when read by id), the ranked document
    ids and their scores (best first, as the span listed them), and the span they came from."""

    trace_id: str
    time_ms: int
    question: str
    question_id: str | None
    docs: list[str]
    scores: list[float]
    span_id: str
    tags: dict[str, str]
    spans: int = 1  # how many spans could have given the ranking
    listed: int = 0  # how many documents the span returned (0: it returned [])
    unnamed: int = 0  # documents dropped for want of an id
    repeated: int = 0  # documents listed again (the first place kept)
    positions: list[int] = field(default_factory=list)  # each kept document's place in the span's outputs
    key: str = ""  # question_key(question), when questions are matched by text
    offsets: list[tuple[int | None, int | None]] = field(default_factory=list)  # each kept document's chunk offsets
    contents: list[str | None] = field(default_factory=list)  # ... and its page_content (to find a chunk without them)


@dataclass(frozen=True)
class Problem:
    trace_id: str
    time_ms: int
    kind: str
    detail: str


def decoded(raw: str | None) -> Any:
    """A span's inputs or outputs from the JSON MLflow stored (None stays None; text that is not JSON, as is)."""
    if raw is None:
        return None
    try:
        return json.loads(raw)
    except (TypeError, ValueError):
        return raw


def at_path(value: Any, path: str) -> Any:
    """``value`` followed along a dotted path of keys and list positions; None where the path leads nowhere."""
    for part in path.split("."):
        if isinstance(value, dict):
            value = value.get(part)
        elif isinstance(value, list) and re.fullmatch(r"-?\d+", part):
            index = int(part)
            value = value[index] if -len(value) <= index < len(value) else None
        else:
            return None
    return value


def default_question(inputs: Any) -> str | None:
    """The input itself when a string; else the last user message of ``messages``; else the only string among the
    inputs' values."""
    if isinstance(inputs, str):
        return inputs
    if not isinstance(inputs, dict):
        return None
    messages = inputs.get("messages")
    if isinstance(messages, list):
        for message in reversed(messages):
            if isinstance(message, dict) and message.get("role") == "user" and isinstance(message.get("content"), str):
                return message["content"]
    strings = [v for v in inputs.values() if isinstance(v, str)]
    return strings[0] if len(strings) == 1 else None


def question_of(call: TracedCall, path: str | None) -> str | Problem:
    """The question the trace was asked (at ``path`` in its root span's inputs, or by default), or why none."""
    inputs = decoded(call.root.inputs) if call.root is not None else None
    question = at_path(inputs, path) if path else default_question(inputs)
    if not isinstance(question, str) or not question.strip():
        keys = ", ".join(map(str, inputs)) if isinstance(inputs, dict) else type(inputs).__name__
        return Problem(call.trace_id, call.time_ms, NO_QUESTION, f"root inputs: {keys}")
    return question


def read_call(call: TracedCall, reading: Reading) -> Answer | Problem:
    """The trace's question and ranking, or why it gives none."""

    def problem(kind: str, detail: str) -> Problem:
        return Problem(call.trace_id, call.time_ms, kind, detail)

    if call.state != "OK":
        return problem(FAILED, f"state {call.state}")
    question = question_of(call, reading.question)
    if isinstance(question, Problem):
        return question
    question_id = None
    if reading.question_id:
        if reading.question_id.startswith(TAG_PATH):
            question_id = call.tags.get(reading.question_id[len(TAG_PATH):])
        else:
            question_id = at_path(decoded(call.root.inputs) if call.root is not None else None, reading.question_id)
        if question_id is None or str(question_id).strip() == "":
            return problem(NO_QUESTION, f"no question id at {reading.question_id}")
        question_id = str(question_id)
    spans = [s for s in call.spans if (s.name == reading.span if reading.span else s.kind == RETRIEVER)]
    if not spans:
        return problem(NO_SPAN, ", ".join(call.span_names))
    span = spans[0] if reading.several == "first" else spans[-1]
    found = _ranking(call, span, question, question_id, reading, len(spans), problem)
    if isinstance(found, Answer) and question_id is None:
        found.key = question_key(question)
    return found


def is_document(value: Any) -> bool:
    """Whether a span's output item is a document: a dict as ``Document.to_dict()`` gives it."""
    return isinstance(value, dict) and ("page_content" in value or "metadata" in value or "id" in value)


def metadata_of(document: dict[str, Any]) -> dict[str, Any]:
    found = document.get("metadata")
    return found if isinstance(found, dict) else {}


def document_id(document: dict[str, Any], places: Sequence[str],
                metadata: dict[str, Any] | None = None) -> str | None:
    """A document's id: the first of ``places`` it has (``id``: ``Document.id``; any other name a key of its
    metadata), as text; None when it has none. The one reading of a retrieved document, for rankings and judgments
    alike: where a document points inside its source (a chunk's offsets) is to be read here too."""
    if metadata is None:
        metadata = metadata_of(document)
    for where in places:
        value = document.get("id") if where == DOCUMENT_ID else metadata.get(where)
        if value is not None and value != "":
            return value if isinstance(value, str) else str(value)
    return None


START_KEYS, END_KEYS = ("start_index", "start"), ("end_index", "end")  # where a chunk's offsets are read


def chunk_offsets(document: dict[str, Any], metadata: dict[str, Any]) -> tuple[int | None, int | None]:
    """Where a retrieved chunk lies in its document: ``(start, end)`` from its metadata, ``end`` the start plus the
    length of its ``page_content`` when only the start is given; ``(None, None)`` when it says nothing of it."""

    def whole(keys: tuple[str, ...]) -> int | None:
        for key in keys:
            value = metadata.get(key)
            if isinstance(value, int) and not isinstance(value, bool):
                return value
            if isinstance(value, float) and value.is_integer():
                return int(value)
        return None

    start, end = whole(START_KEYS), whole(END_KEYS)
    content = document.get("page_content")
    if start is not None and end is None and isinstance(content, str):
        end = start + len(content)
    return (start, end) if start is not None and end is not None else (None, None)


def _ranking(call: TracedCall, span: SpanRecord, question: str, question_id: str | None, reading: Reading,
             found: int, problem) -> Answer | Problem:
    if span.error is not None:
        error = " ".join(span.error.split()) or "an exception"
        return problem(RAISED, f"span {span.name!r} raised {error if len(error) <= 120 else error[:120] + '...'}")
    outputs = decoded(span.outputs)
    if not isinstance(outputs, list) or not all(map(is_document, outputs)):
        return problem(NOT_DOCUMENTS, f"span {span.name!r} returned {_preview(outputs)}")
    answer = Answer(call.trace_id, call.time_ms, question, question_id, [], [], span.span_id, call.tags, found,
                    len(outputs))
    seen: set[tuple[str, int | None, int | None, str | None]] = set()
    places, key = reading.doc_id, reading.score
    docs, scores, positions = answer.docs, answer.scores, answer.positions
    for position, document in enumerate(outputs):
        metadata = metadata_of(document)
        ident = document_id(document, places, metadata)
        if ident is None:
            answer.unnamed += 1
            continue
        offsets = chunk_offsets(document, metadata)
        content = document.get("page_content") if isinstance(document.get("page_content"), str) else None
        identity = (ident, *offsets, None if offsets[0] is not None else content)  # a chunk of it, or it whole
        if identity in seen:
            answer.repeated += 1
            continue
        seen.add(identity)
        answer.offsets.append(offsets)
        answer.contents.append(content)
        if key:
            score = metadata.get(key)
            if isinstance(score, bool) or not isinstance(score, int | float) or not math.isfinite(score):
                return problem(BAD_SCORE, f"document {ident!r}: metadata.{key} = {_preview(score)}")
        else:
            score = 1.0 / (position + 1)
        docs.append(ident)
        scores.append(float(score))
        positions.append(position)
    return answer


def _preview(value: Any, width: int = 80) -> str:
    text = " ".join(json.dumps(value, default=str).split())
    return text if len(text) <= width else text[:width] + "..."
