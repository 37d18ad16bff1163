"""MLflow Tracing, and only here: a traced application's calls read back as plain records (the question its root
span was asked, its retriever spans' outputs, the assessments on it), and judgments written back as assessments.

Nothing MLflow-typed leaves this module: :class:`TracedCall` holds strings, numbers and the spans' JSON as MLflow
stored it, decoded only where a ranking needs it (``pipeline.traces``). Spans are read through ``Span.to_dict()``,
which a span read from a database store answers from what it stored, without rebuilding the OpenTelemetry span:
reading 10,000 traces costs little more than ``mlflow.search_traces`` alone (``python -m bench.traces``).

A traced application's experiment is only read here (never created, tagged or moved into rankscope's runs view):
it stays in MLflow's GenAI mode, where the trace view shows the assessments written back.
"""

from __future__ import annotations

import base64
import binascii
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from itertools import pairwise
from typing import Any

from metrics.errors import InputError
from pipeline.common.redact import redact_text
from pipeline.tracking import background
from pipeline.tracking.client import MlflowClient, MlflowException, tracing_client
from pipeline.tracking.store import creation_lock, sqlite_path, store_error

RETRIEVER = "RETRIEVER"  # MLflow's span type of a retrieval step (mlflow.entities.SpanType.RETRIEVER)
PAGE = 500  # traces a search returns at a time
IDS_PER_SEARCH = 100  # trace ids named in one search's filter (a sample is fetched this many at a time)
# Span attributes as MLflow stores them (mlflow.tracing.constant.SpanAttributeKey), each value JSON-encoded.
SPAN_TYPE, SPAN_INPUTS, SPAN_OUTPUTS = "mlflow.spanType", "mlflow.spanInputs", "mlflow.spanOutputs"
TRACE_NAME = "mlflow.traceName"  # the trace tag holding its root span's name (mlflow.tracing.constant.TraceTagKey)
STATUS_ERROR = "STATUS_CODE_ERROR"  # a span's status code when it raised (OpenTelemetry's, in Span.to_dict())


@dataclass(frozen=True)
class TraceQuery:
    """Which traces: an experiment of a store, a window of request times (``since`` included, ``until`` not), the
    trace's name (its root span's), tags it must carry, and any other MLflow trace filter, all ANDed."""

    uri: str
    experiment: str
    since_ms: int | None = None
    until_ms: int | None = None
    name: str | None = None
    tags: Mapping[str, str] = field(default_factory=dict)
    filter: str | None = None

    def filter_string(self) -> str:
        """The MLflow search filter of the query (``trace.timestamp_ms >= ... AND tag.`app_version` = 'v1' ...``)."""
        parts = []
        if self.since_ms is not None:
            parts.append(f"trace.timestamp_ms >= {int(self.since_ms)}")
        if self.until_ms is not None:
            parts.append(f"trace.timestamp_ms < {int(self.until_ms)}")
        if self.name:
            parts.append(f"trace.name = {_quoted(self.name, 'the trace name')}")
        for key, value in self.tags.items():
            if "`" in str(key):
                raise InputError(f"trace tag {key!r}: a tag name with a backtick cannot be searched for")
            parts.append(f"tag.`{key}` = {_quoted(str(value), f'tag {key}')}")
        if self.filter and self.filter.strip():
            parts.append(f"({self.filter.strip()})" if parts else self.filter.strip())
        return " AND ".join(parts)


def _quoted(value: str, what: str) -> str:
    if "'" in value:
        raise InputError(f"{what} {value!r} holds a single quote: search for it with a filter string instead")
    return f"'{value}'"


@dataclass
class SpanRecord:
    """One span: ids (16 hex digits, as assessments name spans), name, type, start, its inputs and outputs as the
    JSON text MLflow stored (None when it has none), and whether it raised."""

    span_id: str
    parent_id: str | None
    name: str
    kind: str | None
    start_ns: int
    inputs: str | None = None
    outputs: str | None = None
    error: str | None = None  # the span ended in error (it raised): its status message, "" when it has none


@dataclass
class AssessmentRecord:
    """An assessment on a trace or one of its spans (MLflow's Feedback or Expectation), as plain values."""

    name: str
    kind: str  # "feedback" or "expectation"
    value: Any
    span_id: str | None
    metadata: dict[str, str]
    source_type: str  # HUMAN, LLM_JUDGE, CODE ...
    source_id: str
    valid: bool  # False: overridden by a later assessment
    time_ms: int
    failed: bool = False  # a feedback that holds an error instead of a value


@dataclass
class TracedCall:
    """One trace: its id, request time, state (OK, ERROR ...), name, tags; its root span; the spans that may hold a
    ranking (every RETRIEVER span, and any span of the name asked for), in start order; the names and types of all
    its spans (for messages); its assessments."""

    trace_id: str
    time_ms: int
    state: str
    name: str | None
    tags: dict[str, str]
    root: SpanRecord | None
    spans: list[SpanRecord]
    span_names: list[str]
    assessments: list[AssessmentRecord]


@contextmanager
def _answering(uri: str) -> Iterator[None]:
    """MLflow's errors from the store as one-line InputErrors naming it."""
    try:
        yield
    except InputError:
        raise
    except (MlflowException, OSError) as exc:
        raise InputError(f"the MLflow store of the traces {redact_text(uri)} did not answer: {store_error(exc)}") \
            from None


def open_experiment(uri: str, experiment: str) -> tuple[MlflowClient, str]:
    """A client of the store holding the traces and the id of the experiment (by name, else by id). The store and
    the experiment must exist already: an InputError naming what the store holds otherwise."""
    db = sqlite_path(uri)
    if db is not None and not db.is_file():
        raise InputError(f"no MLflow store at {redact_text(uri)}: the traces are read from an existing store")
    with _answering(uri):
        with creation_lock(uri):
            client = MlflowClient(tracking_uri=uri)
            found = client.get_experiment_by_name(experiment)
        if found is None and experiment.isdigit():
            try:
                found = client.get_experiment(experiment)
            except MlflowException:
                found = None
        if found is None or found.lifecycle_stage == "deleted":
            names = sorted(e.name for e in client.search_experiments(max_results=50))
            raise InputError(f"experiment {experiment!r} does not exist in {redact_text(uri)} (experiments there: "
                             f"{', '.join(names) or 'none'})")
    return client, found.experiment_id


def trace_times(query: TraceQuery) -> list[tuple[str, int]]:
    """``(trace id, request time in ms)`` of every trace the query matches, oldest first, spans not read."""
    client, experiment_id = open_experiment(query.uri, query.experiment)
    return [(trace.info.trace_id, int(trace.info.request_time)) for page in
            _pages(client, query, experiment_id, query.filter_string()) for trace in page]


def read_calls(query: TraceQuery, span_name: str | None = None,
               trace_ids: Sequence[str] | None = None) -> Iterator[TracedCall]:
    """The traces the query matches (only those of ``trace_ids`` when given), oldest first, as plain records; read
    a page at a time. ``span_name``: a span of that name may hold the ranking whatever its type."""
    client, experiment_id = open_experiment(query.uri, query.experiment)
    for search in _searches(query, trace_ids):
        for page in _pages(client, query, experiment_id, search):
            yield from (_call(trace, span_name) for trace in _with_spans(query.uri, page))


SMALL = 1000  # traces the store process reads alone (this process then never opens the traces' store itself)
SHARES = 32  # windows of request times a larger reading is cut into, shared between this process and the copy
AHEAD = 2  # windows handed to the copy at a time


def read_shared(query: TraceQuery, span_name: str | None, trace_ids: Sequence[str] | None,
                convert: Callable[[TracedCall, Any], Any], settings: Any, small: int = SMALL,
                shares: int = SHARES) -> list[Any]:
    """``convert(call, settings)`` of every trace :func:`read_calls` reads, in its order, the reading shared with the
    store process (:mod:`pipeline.tracking.background`) where one runs: reading traces is CPU work (SQLAlchemy rows
    made into MLflow's entities), and that process, which has the store's modules loaded, waits meanwhile.

    Up to ``small`` traces, the copy reads them all: this process never loads the SQL store. More, and the query's
    window of request times is cut into ``shares`` windows: the copy reads them from the oldest, this process from the
    newest, until they meet. The copy is handed :data:`AHEAD` at a time, so a busy copy takes fewer, and this process
    never waits for it: a window handed out that has not come back when the others are read is read here too (the
    copy's answer, read by the next request, is then dropped). Named traces (``trace_ids``, a sample) are shared a
    search at a time. ``convert`` is a module-level function (the copy gets it by name); what it returns crosses the
    pipe, so it should be small: a ranking, not the spans. Without a copy, or once it is gone, this process reads
    everything itself."""
    process = background.current()
    via = sorted(process.uris)[0] if process is not None and process.usable() and process.uris else None
    planned = None if via is None else _in_copy(process, via, _plan, (query, span_name, trace_ids, convert, settings,
                                                                      small, shares))
    if planned is None:
        return [convert(call, settings) for call in read_calls(query, span_name, trace_ids)]
    experiment_id, pieces, done = planned
    if done is not None:
        return done
    found: list[list[Any] | None] = [None] * len(pieces)
    failed: list[BaseException] = []
    handed: list[int] = []  # the pieces handed to the copy, in order
    ahead, front, back = [0], 0, len(pieces)

    def answered(place: int) -> Callable[[tuple[Any, ...]], None]:
        def take(answer: tuple[Any, ...]) -> None:
            ahead[0] -= 1
            if answer[0] == "returned" and found[place] is None:
                found[place] = answer[1]
            elif answer[0] == "raised":
                failed.append(answer[1])
        return take  # gone: the piece is read here

    def hand_over() -> None:
        nonlocal front
        while ahead[0] < AHEAD and front < back and process.usable():
            try:
                process.run_later(via, _read_piece, (pieces[front], experiment_id, span_name, convert, settings),
                                  answered(front))
            except background.Gone:
                return
            handed.append(front)
            front += 1
            ahead[0] += 1

    hand_over()
    while not failed:
        if front < back:
            back -= 1
            place = back
        else:  # all handed out: the last one handed, not back yet, is read here too (the copy, niced, may be slow)
            waiting = [i for i in handed if found[i] is None]
            if not waiting:
                break
            place = waiting[-1]
        found[place] = _read_piece(None, pieces[place], experiment_id, span_name, convert, settings)
        process.settle(waiting=False)
        hand_over()
    if failed:
        raise failed[0]
    return [item for part in found for item in part or ()]  # answers still owed are read by the next request


def _in_copy(process: Any, via: str, function: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    """``function(client, *args)`` made by the store process, waited for: its value (what it raised, raised here);
    None when the process is gone."""
    answers: list[tuple[Any, ...]] = []
    try:
        process.run_later(via, function, args, answers.append)
        process.settle()
    except background.Gone:
        return None
    if not answers or answers[0][0] == "gone":
        return None
    if answers[0][0] == "raised":
        raise answers[0][1]
    return answers[0][1]


def _plan(client: MlflowClient, query: TraceQuery, span_name: str | None, trace_ids: Sequence[str] | None,
          convert: Callable[[TracedCall, Any], Any], settings: Any, small: int,
          shares: int) -> tuple[str, list[tuple[TraceQuery, list[str] | None]], list[Any] | None]:
    """Made by the store process: the experiment's id, and either the pieces to share or, for a small reading, its
    result (``convert`` of every trace)."""
    _, experiment_id = open_experiment(query.uri, query.experiment)
    if trace_ids is not None:
        pieces = [(query, list(trace_ids[start:start + IDS_PER_SEARCH]))
                  for start in range(0, len(trace_ids), IDS_PER_SEARCH)]
        if len(trace_ids) > small:
            return experiment_id, pieces, None
        return experiment_id, [], [item for piece in pieces for item in
                                   _read_piece(None, piece, experiment_id, span_name, convert, settings)]
    own = _client(query.uri)
    first = next(_pages(own, query, experiment_id, query.filter_string(), size=small), [])
    if len(first) < small:
        return experiment_id, [], [convert(_call(trace, span_name), settings)
                                    for trace in _with_spans(query.uri, first)]
    newest = next(_pages(own, query, experiment_id, query.filter_string(), order="DESC", size=1))
    low, high = int(first[0].info.request_time), int(newest[0].info.request_time) + 1
    cuts = sorted({low + (high - low) * i // shares for i in range(shares)} | {high})
    return experiment_id, [(replace(query, since_ms=a, until_ms=b), None) for a, b in pairwise(cuts)], None


def _read_piece(client: MlflowClient | None, piece: tuple[TraceQuery, list[str] | None], experiment_id: str,
                span_name: str | None, convert: Callable[[TracedCall, Any], Any], settings: Any) -> list[Any]:
    """``convert`` of every trace of one piece of a shared reading (in the copy, or here)."""
    query, trace_ids = piece
    own = _client(query.uri)
    return [convert(_call(trace, span_name), settings) for search in _searches(query, trace_ids)
            for page in _pages(own, query, experiment_id, search) for trace in _with_spans(query.uri, page)]


def _client(uri: str) -> MlflowClient:
    return MlflowClient(tracking_uri=uri)


def _searches(query: TraceQuery, trace_ids: Sequence[str] | None) -> list[str]:
    """The filter strings that find the query's traces: its own, or one per :data:`IDS_PER_SEARCH` ids named."""
    base = query.filter_string()
    if trace_ids is None:
        return [base]
    searches = []
    for start in range(0, len(trace_ids), IDS_PER_SEARCH):
        named = ", ".join(f"'{t}'" for t in trace_ids[start:start + IDS_PER_SEARCH])
        searches.append(" AND ".join(filter(None, [base, f"trace.request_id IN ({named})"])))
    return searches


def _pages(client: MlflowClient, query: TraceQuery, experiment_id: str, filter_string: str, order: str = "ASC",
           size: int = PAGE) -> Iterator[list[Any]]:
    """The matching traces a page at a time, oldest first (``order="DESC"``: newest first), without their spans."""
    token = None
    while True:
        with _answering(query.uri):
            try:
                page = client.search_traces(locations=[experiment_id], filter_string=filter_string or None,
                                            max_results=size, order_by=[f"timestamp_ms {order}"], page_token=token,
                                            include_spans=False)
            except MlflowException as exc:
                if "filter" in str(exc).lower() or "invalid" in str(exc).lower():
                    raise InputError(f"MLflow refused the trace filter {filter_string!r} (retriever.filter, or the "
                                     f"window, name and tags asked for): {str(exc).splitlines()[0][:300]}") from None
                raise
        yield list(page)
        token = page.token
        if not token:
            return


def _with_spans(uri: str, page: Sequence[Any]) -> list[Any]:
    """The page's traces with their spans, in the page's order (a trace whose spans are not all exported yet is left
    out, as ``search_traces`` leaves it out).

    A database store gives a page's traces in one ``batch_get_traces`` call: ``search_traces`` would read their
    metadata again ten traces at a time, each batch in a thread of its own (over 10,000 traces, twice the CPU
    time). Any other store, and traces whose spans live elsewhere (artifacts, an archive), go through MLflow's tracing
    client, which knows where to find them."""
    ids = [trace.info.trace_id for trace in page]
    if not ids:
        return []
    tracing = tracing_client(uri)
    with _answering(uri):
        found = None
        sql = sys.modules.get("mlflow.store.tracking.sqlalchemy_store")
        if sql is not None and isinstance(tracing.store, sql.SqlAlchemyStore):
            try:
                found = tracing.store.batch_get_traces(ids)
            except MlflowException:  # spans kept outside the database
                found = None
        if found is None:
            found = tracing.batch_get_traces(ids)
    by_id = {trace.info.trace_id: trace for trace in found}
    return [by_id[i] for i in ids if i in by_id]


def _call(trace: Any, span_name: str | None) -> TracedCall:
    info = trace.info
    root, spans, names = None, [], []
    for span in trace.data.spans:
        data = span.to_dict()
        attributes = data.get("attributes") or {}
        kind = attributes.get(SPAN_TYPE)
        kind = kind.strip('"') if isinstance(kind, str) else None
        name = str(data.get("name") or "")
        names.append(f"{name} ({kind or 'no type'})")
        is_root = not data.get("parent_span_id")
        ranks = kind == RETRIEVER or (span_name is not None and name == span_name)
        if is_root or ranks:  # only these are read further: the question, and the rankings
            record = _span(data, attributes, name, kind)
            if is_root:
                root = record
            if ranks:
                spans.append(record)
    spans.sort(key=lambda s: s.start_ns)
    state = getattr(info.state, "value", info.state)
    return TracedCall(info.trace_id, int(info.request_time), str(state), info.tags.get(TRACE_NAME),
                      dict(info.tags), root, spans, names, [_assessment(a) for a in info.assessments or []])


def _span(data: dict[str, Any], attributes: dict[str, Any], name: str, kind: str | None) -> SpanRecord:
    status = data.get("status") or {}
    error = None
    if isinstance(status, dict) and status.get("code") == STATUS_ERROR:
        error = str(status.get("message") or "")
    parent = data.get("parent_span_id")
    return SpanRecord(_hex_id(data.get("span_id")), _hex_id(parent) if parent else None, name, kind,
                      int(data.get("start_time_unix_nano") or 0), attributes.get(SPAN_INPUTS),
                      attributes.get(SPAN_OUTPUTS), error)


def _hex_id(value: Any) -> str:
    """A span id as MLflow shows it (16 hex digits) from its stored form (base64 of 8 bytes, or hex already)."""
    text = str(value or "")
    if len(text) == 16 and all(c in "0123456789abcdef" for c in text):
        return text
    try:
        return base64.b64decode(text, validate=True).hex()
    except (binascii.Error, ValueError):
        return text


def _assessment(found: Any) -> AssessmentRecord:
    feedback = getattr(found, "feedback", None)
    kind = "feedback" if feedback is not None else "expectation"
    source = found.source
    failed = feedback is not None and getattr(feedback, "error", None) is not None
    return AssessmentRecord(str(found.name), kind, found.value, found.span_id,
                            {str(k): str(v) for k, v in (found.metadata or {}).items()},
                            str(getattr(source, "source_type", "") or ""), str(getattr(source, "source_id", "") or ""),
                            found.valid is not False, int(found.last_update_time_ms or found.create_time_ms or 0),
                            failed)


# -- writing judgments back ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Judgment:
    """A document's grade for the question a trace asked, to be shown on the trace's retriever span."""

    trace_id: str
    span_id: str | None
    doc_id: str
    grade: int
    position: int | None = None  # the document's place in the span's outputs (0 first), when it is there


def log_judgments(uri: str, judgments: Sequence[Judgment], name: str, source_id: str) -> int:
    """Each judgment as an MLflow expectation (ground truth, source HUMAN) named ``name`` on the trace's retriever
    span, its document in ``metadata.doc_uri`` (and ``chunk_index`` when the span retrieved it): the trace view shows
    them, and reading the traces back gives the same judgments. Returns how many were written."""
    from mlflow.entities import AssessmentSource, AssessmentSourceType, Expectation

    from pipeline.tracking.client import tracing_client

    tracing = tracing_client(uri)
    source = AssessmentSource(source_type=AssessmentSourceType.HUMAN, source_id=source_id)
    with _answering(uri):
        for judgment in judgments:
            metadata = {"doc_uri": judgment.doc_id}
            if judgment.position is not None:
                metadata["chunk_index"] = str(judgment.position)
            tracing.log_assessment(judgment.trace_id, Expectation(name=name, value=int(judgment.grade), source=source,
                                                                  metadata=metadata, span_id=judgment.span_id))
    return len(judgments)


def link_traces(client: MlflowClient, run_id: str, trace_ids: Sequence[str]) -> None:
    """Link traces to a run of the same store (MLflow shows them on the run), 100 at a time as MLflow takes them."""
    for start in range(0, len(trace_ids), IDS_PER_SEARCH):
        client.link_traces_to_run(list(trace_ids[start:start + IDS_PER_SEARCH]), run_id)
