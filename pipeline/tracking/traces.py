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
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from metrics.errors import InputError
from pipeline.common.redact import redact_text
from pipeline.tracking.client import MlflowClient, MlflowException
from pipeline.tracking.store import creation_lock, sqlite_path, store_error

RETRIEVER = "RETRIEVER"  # MLflow's span type of a retrieval step (mlflow.entities.SpanType.RETRIEVER)
PAGE = 500  # traces a search returns at a time
IDS_PER_SEARCH = 100  # trace ids named in one search's filter (a sample is fetched this many at a time)
# Span attributes as MLflow stores them (mlflow.tracing.constant.SpanAttributeKey), each value JSON-encoded.
SPAN_TYPE, SPAN_INPUTS, SPAN_OUTPUTS = "mlflow.spanType", "mlflow.spanInputs", "mlflow.spanOutputs"
TRACE_NAME = "mlflow.traceName"  # the trace tag holding its root span's name (mlflow.tracing.constant.TraceTagKey)


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
    """One span: ids (16 hex digits, as assessments name spans), name, type, start, and its inputs and outputs as
    the JSON text MLflow stored (None when it has none)."""

    span_id: str
    parent_id: str | None
    name: str
    kind: str | None
    start_ns: int
    inputs: str | None = None
    outputs: str | None = None


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
    return [(trace.info.trace_id, int(trace.info.request_time))
            for trace in _search(client, query, experiment_id, query.filter_string(), include_spans=False)]


def read_calls(query: TraceQuery, span_name: str | None = None,
               trace_ids: Sequence[str] | None = None) -> Iterator[TracedCall]:
    """The traces the query matches (only those of ``trace_ids`` when given), oldest first, as plain records; read
    a page at a time. ``span_name``: a span of that name may hold the ranking whatever its type."""
    client, experiment_id = open_experiment(query.uri, query.experiment)
    base = query.filter_string()
    if trace_ids is None:
        searches = [base]
    else:
        searches = []
        for start in range(0, len(trace_ids), IDS_PER_SEARCH):
            named = ", ".join(f"'{t}'" for t in trace_ids[start:start + IDS_PER_SEARCH])
            searches.append(" AND ".join(filter(None, [base, f"trace.request_id IN ({named})"])))
    for search in searches:
        for trace in _search(client, query, experiment_id, search, include_spans=True):
            yield _call(trace, span_name)


def _search(client: MlflowClient, query: TraceQuery, experiment_id: str, filter_string: str,
            include_spans: bool) -> Iterator[Any]:
    token = None
    while True:
        with _answering(query.uri):
            try:
                page = client.search_traces(locations=[experiment_id], filter_string=filter_string or None,
                                            max_results=PAGE, order_by=["timestamp_ms ASC"], page_token=token,
                                            include_spans=include_spans)
            except MlflowException as exc:
                if "filter" in str(exc).lower() or "invalid" in str(exc).lower():
                    raise InputError(f"MLflow refused the trace filter {filter_string!r} (retriever.filter, or the "
                                     f"window, name and tags asked for): {str(exc).splitlines()[0][:300]}") from None
                raise
        yield from page
        token = page.token
        if not token:
            return


def _call(trace: Any, span_name: str | None) -> TracedCall:
    info = trace.info
    root, spans, names = None, [], []
    for span in trace.data.spans:
        record = _span(span.to_dict(), span_name)
        names.append(f"{record.name} ({record.kind or 'no type'})")
        if record.parent_id is None:
            root = record
        if record.kind == RETRIEVER or (span_name is not None and record.name == span_name):
            spans.append(record)
    spans.sort(key=lambda s: s.start_ns)
    state = getattr(info.state, "value", info.state)
    return TracedCall(info.trace_id, int(info.request_time), str(state), info.tags.get(TRACE_NAME),
                      dict(info.tags), root, spans, names, [_assessment(a) for a in info.assessments or []])


def _span(data: dict[str, Any], span_name: str | None) -> SpanRecord:
    attributes = data.get("attributes") or {}
    kind = attributes.get(SPAN_TYPE)
    kind = kind.strip('"') if isinstance(kind, str) else None
    return SpanRecord(_hex_id(data.get("span_id")), _hex_id(data.get("parent_span_id")) if data.get("parent_span_id")
                      else None, str(data.get("name") or ""), kind, int(data.get("start_time_unix_nano") or 0),
                      attributes.get(SPAN_INPUTS), attributes.get(SPAN_OUTPUTS))


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
