"""Your own documents, questions and judgments, in the shape you keep them: JSONL, CSV/TSV or Parquet files whose
columns a config maps (``conf/corpus/files.yaml``).

A :class:`Table` names a file, its id column, the text columns joined in order (one space between them) and the
columns kept as metadata; :class:`Judgments` names the question, document and grade columns of a judgments file (or
reads TREC/BEIR qrels). A JSONL field inside a nested object is named with dots (``meta.pmid``); in CSV and Parquet a
dot is part of a column's name. Every reader reports bad input in one line naming the file and the line (the row, in
Parquet): a missing column (listing those found), a duplicate id (both places), an id or grade that is not one.
"""

from __future__ import annotations

import csv
import dataclasses
import gzip
import io
import json
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from metrics.errors import InputError
from metrics.qrels import Qrels
from metrics.spans import SpanRows, Spans, has_span_header, read_beir_spans
from metrics.textfile import SHOWN, check_file, not_text
from metrics.trec import read_qrels
from pipeline.common import progress
from pipeline.data.assemble import Notes, Records, assemble, join_text, json_object
from pipeline.data.collection import Collection
from pipeline.data.grades import UNJUDGED, Graded
from pipeline.data.span_judgments import check_spans

ROUTE = "files"
FORMATS = {".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl", ".csv": "csv", ".tsv": "tsv", ".tab": "tsv",
           ".parquet": "parquet", ".pq": "parquet", ".qrels": "qrels", ".trec": "qrels"}
UNJUDGED_RULES = ("keep", "drop")
BATCH = 65_536  # Parquet rows read at a time


def file_format(path: Path, given: str | None, key: str) -> str:
    """The format a file is read as: ``given``, else its name's ending (``.gz`` looked through)."""
    if given:
        if given not in set(FORMATS.values()):
            raise InputError(f"{key}.format={given}: expected one of {', '.join(sorted(set(FORMATS.values())))}")
        return given
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] == ".gz":
        suffixes.pop()
    found = FORMATS.get(suffixes[-1] if suffixes else "")
    if found is None:
        raise InputError(f"cannot tell the format from the file name: set {key}.format to one of "
                         f"{', '.join(sorted(set(FORMATS.values())))}", path)
    return found


def _opener(path: Path) -> Callable[[], io.BufferedIOBase]:
    return (lambda: gzip.open(path, "rb")) if path.suffix.lower() == ".gz" else (lambda: path.open("rb"))


def _columns_error(path: Path, missing: Sequence[str], found: Sequence[str], key: str) -> InputError:
    dotted = " (a dot is part of a column's name in CSV and Parquet: nested fields are read from JSONL only)" if any(
        "." in m for m in missing) else ""
    return InputError(f"no column {', '.join(repr(m) for m in missing)} ({key}); the columns found: "
                      f"{', '.join(found) or 'none'}{dotted}", path)


# -- rows: (place, values of the wanted columns) -------------------------------------------------------------------


def rows(path: Path, fmt: str, wanted: Sequence[str], required: Sequence[str], key: str,
         every: Sequence[str] = ()) -> Iterator[tuple[int, list]]:
    """``(line or row, [value of each wanted column])``; a required column missing from the file is one line
    listing the columns it has. Values are as the file holds them (None where a record lacks an optional one).
    ``every``: the columns each record needs (an id), which a JSONL file is searched for before its first record
    is refused for lacking one (a misnamed field is then said as such, not as an empty id at line 1)."""
    try:
        if fmt == "jsonl":
            yield from _jsonl_rows(path, list(wanted), list(required), key, list(every))
        else:
            yield from (_parquet_rows if fmt == "parquet" else _csv_rows)(path, fmt, list(wanted), list(required), key)
    except (OSError, EOFError) as exc:  # a damaged .gz file
        raise InputError(f"cannot be read: {exc}", path) from None


ABSENT = object()  # a field a JSON record does not have (None is one it has, as null)


def field_value(record: dict[str, Any], name: str) -> Any:
    """A JSON record's field: the key ``name`` itself, else, for a dotted name, the path into nested objects
    (``meta.pmid``: ``record["meta"]["pmid"]``); ABSENT when it has neither."""
    if name in record:
        return record[name]
    if "." not in name:
        return ABSENT
    value: Any = record
    for part in name.split("."):
        if not isinstance(value, dict) or part not in value:
            return ABSENT
        value = value[part]
    return value


def field_names(record: dict[str, Any], prefix: str = "") -> Iterator[str]:
    """The fields a record offers, as config names them: nested objects' fields dotted (``meta.pmid``)."""
    for name, value in record.items():
        if isinstance(value, dict) and value:
            yield from field_names(value, f"{prefix}{name}.")
        else:
            yield f"{prefix}{name}"


def _jsonl_rows(path: Path, wanted: list[str], required: list[str], key: str,
                every: list[str]) -> Iterator[tuple[int, list]]:
    """A record may leave out a field others have (JSON writers drop nulls); the id is in every record, and a
    field no record has is a missing column. A field is a key or a dotted path into nested objects."""
    opener = _opener(path)
    unseen: dict[str, None] | None = None  # required fields no record has had yet
    seen: dict[str, None] = {}
    try:
        with io.TextIOWrapper(opener(), encoding="utf-8") as handle:
            for number, line in enumerate(handle, 1):
                if not line.strip():
                    continue
                record = json_object(line, path, number)
                values = [field_value(record, c) for c in wanted]
                if unseen is None:
                    unseen = dict.fromkeys(required)
                if unseen:
                    seen.update(dict.fromkeys(field_names(record)))
                    for column, value in zip(wanted, values):
                        if value is not ABSENT:
                            unseen.pop(column, None)
                    if any(c in unseen for c in every):  # the first record lacks its id: does any record have it?
                        _search_rest(handle, unseen, seen)
                        if any(c in unseen for c in every):
                            break
                yield number, [None if v is ABSENT else v for v in values]
    except UnicodeDecodeError:
        raise not_text(path, opener) from None
    if unseen:
        raise InputError(f"no field {', '.join(repr(m) for m in unseen)} in any record ({key}); the fields found: "
                         f"{', '.join(seen) or 'none'}", path)


def _search_rest(lines: Iterator[str], unseen: dict[str, None], seen: dict[str, None]) -> None:
    """Read the remaining records for the fields still unseen (and every field they offer): the reading stops at
    the record before, which is refused whatever this finds. Malformed lines are passed over here."""
    for line in lines:
        try:
            record = json.loads(line) if line.strip() else None
        except json.JSONDecodeError:
            continue
        if isinstance(record, dict):
            seen.update(dict.fromkeys(field_names(record)))
            for column in [c for c in unseen if field_value(record, c) is not ABSENT]:
                del unseen[column]


def _csv_rows(path: Path, fmt: str, wanted: list[str], required: list[str], key: str) -> Iterator[tuple[int, list]]:
    opener = _opener(path)
    try:
        with io.TextIOWrapper(opener(), encoding="utf-8", newline="") as handle:
            reader = csv.reader(handle, delimiter="\t" if fmt == "tsv" else ",")
            header = next(reader, None)
            if header is None:
                raise InputError("the file is empty: expected a header line naming the columns", path)
            header = [h.strip().lstrip("\ufeff") for h in header]
            missing = [c for c in required if c not in header]
            if missing:
                raise _columns_error(path, missing, header, key)
            where = [header.index(c) if c in header else None for c in wanted]
            width = len(header)
            for record in reader:
                if not record or (len(record) == 1 and not record[0].strip()):
                    continue
                if len(record) != width:
                    raise InputError(f"{len(record)} fields where the header has {width}", path, reader.line_num)
                yield reader.line_num, [None if i is None else record[i] for i in where]
    except UnicodeDecodeError:
        raise not_text(path, opener) from None
    except csv.Error as exc:
        raise InputError(f"malformed {fmt.upper()} ({exc})", path) from None


def _parquet_rows(path: Path, fmt: str, wanted: list[str], required: list[str], key: str) -> Iterator[tuple[int, list]]:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise InputError("reading Parquet needs pyarrow: pip install pyarrow", path) from None
    try:
        table = pq.ParquetFile(path)
    except Exception as exc:  # not a Parquet file
        raise InputError(f"not a readable Parquet file ({exc})", path) from None
    names = list(table.schema_arrow.names)
    missing = [c for c in required if c not in names]
    if missing:
        raise _columns_error(path, missing, names, key)
    present = [c for c in dict.fromkeys(wanted) if c in names]
    row = 0
    for batch in table.iter_batches(batch_size=BATCH, columns=present):
        columns = batch.to_pydict()
        values = [columns.get(c, [None] * batch.num_rows) for c in wanted]
        for i in range(batch.num_rows):
            row += 1
            yield row, [column[i] for column in values]


def _blank(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _text(value: Any) -> str:
    if _blank(value):
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return value if isinstance(value, str) else str(value)


def _place(fmt: str) -> str:
    return "row" if fmt == "parquet" else "line"


def _at(path: Path, fmt: str, number: int) -> tuple[Path | str, int | None]:
    """Where an error points: ``file:line`` for text files, ``file`` and 'row N' in the message for Parquet."""
    return (path, None) if fmt == "parquet" else (path, number)


# -- the config entries -------------------------------------------------------------------------------------------


def _names(value: Any) -> list[str]:
    """One column name or a list of them, as a list."""
    if value is None:
        return []
    return [str(value)] if isinstance(value, str) else [str(v) for v in value]


@dataclass(frozen=True)
class Table:
    """A file of documents or questions: its id column, the text columns (joined in this order), the columns kept
    as metadata, and its format (``jsonl``, ``csv``, ``tsv`` or ``parquet``; by default from the file name)."""

    path: str
    id: str = "id"
    text: Any = "text"  # one column, or a list joined in order
    metadata: Any = None  # columns kept beside the text (a chunk's source, a question's tag)
    format: str | None = None

    @classmethod
    def from_config(cls, context: Any, path: str, **settings: Any) -> Table:
        """``path`` relative to the folder the command started in."""
        return cls(path=str(context.path(path)), **settings)

    @property
    def text_columns(self) -> list[str]:
        return _names(self.text)

    @property
    def metadata_columns(self) -> list[str]:
        return _names(self.metadata)

    def read(self, what: str, key: str) -> tuple[Records, dict[str, list]]:
        """The records and their metadata columns (aligned with the records)."""
        path = check_file(self.path)
        fmt = file_format(path, self.format, key)
        if fmt == "qrels":
            raise InputError(f"{key}: a qrels file holds judgments, not {what}s", path)
        if not self.text_columns:
            raise InputError(f"{key}.text: name at least one text column")
        wanted = [self.id, *self.text_columns, *self.metadata_columns]
        required = [self.id, *self.text_columns, *self.metadata_columns]
        texts = len(self.text_columns)
        metadata: dict[str, list] = {c: [] for c in self.metadata_columns}

        def records() -> Iterator[tuple[int, str, str]]:
            with progress.ticker(None, f"reading {path.name}", what) as tick:
                for number, values in rows(path, fmt, wanted, required, key, every=[self.id]):
                    ident = values[0]
                    if _blank(ident) or ident == "":
                        raise InputError(_with_row(f"{what} without an id ({self.id!r} is empty)", fmt, number),
                                         *_at(path, fmt, number))
                    for column, value in zip(self.metadata_columns, values[1 + texts:]):
                        metadata[column].append(None if _blank(value) else value)
                    tick(1)
                    yield number, _text(ident), join_text(_text(v) for v in values[1:1 + texts])

        found = Records.read(records(), what, path, place=_place(fmt))
        return found, metadata


def _with_row(message: str, fmt: str, number: int) -> str:
    return f"row {number}: {message}" if fmt == "parquet" else message


@dataclass(frozen=True)
class Judgments:
    """A judgments file: the question, document and grade columns (``grade: null``: every listed pair counts as
    relevant, grade 1), or TREC/BEIR qrels (``format: qrels``, or a ``.qrels``/``.trec`` file)."""

    path: str | None = None  # none: the questions are not judged yet (ranked and counted, left out of the means)
    question: str = "query_id"
    document: str = "doc_id"
    grade: str | None = "grade"
    format: str | None = None
    start: str | None = None  # the columns of a span's character offsets in its document (end exclusive): a row
    end: str | None = None  # with them judges that span, one without them the whole document

    @classmethod
    def from_config(cls, context: Any, path: str | None = None, **settings: Any) -> Judgments:
        return cls(path=None if path in (None, "") else str(context.path(path)), **settings)

    def read(self, key: str) -> Qrels:
        return self.read_spans(key)[0]

    def read_spans(self, key: str) -> tuple[Qrels, Spans | None, list[int]]:
        """The judgments, the spans among them (None without ``start``/``end`` columns) and each span's line or row."""
        if self.path is None:
            return Qrels.from_dict({}), None, []
        path = check_file(self.path)
        fmt = file_format(path, self.format, key)
        if fmt == "qrels":  # TREC or BEIR qrels; a BEIR header naming start and end: span judgments
            return read_beir_spans(path) if has_span_header(path) else (read_qrels(path), None, [])
        offsets = [c for c in (self.start, self.end) if c]
        if len(offsets) == 1:
            raise InputError(f"{key}: a span needs both columns, start and end (only one is set)")
        every = [self.question, self.document, *_names(self.grade)]  # what each row holds (offsets may be blank)
        wanted = [*every, *offsets]
        judgments = SpanRows(path, _place(fmt))
        for number, values in rows(path, fmt, wanted, wanted, key, every=every):
            question, document = values[0], values[1]
            for column, value in ((self.question, question), (self.document, document)):
                if _blank(value) or value == "":
                    raise InputError(_with_row(f"judgment without a {column!r}", fmt, number), *_at(path, fmt, number))
            grade = _grade(values[2], self.grade, path, fmt, number) if self.grade else 1
            start, end = (values[-2], values[-1]) if offsets else (None, None)
            judgments.add(_text(question), _text(document), grade, None if _blank(start) else start,
                          None if _blank(end) else end, number)
        return judgments.build()


def _grade(value: Any, column: str | None, path: Path, fmt: str, number: int) -> int:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    text = "" if _blank(value) else str(value).strip()
    try:
        return int(text)
    except ValueError:
        try:
            number_value = float(text)
        except ValueError:
            number_value = math.nan
        if number_value.is_integer():
            return int(number_value)
    raise InputError(_with_row(f"grade {text[:SHOWN]!r} in column {column!r} is not an integer", fmt, number),
                     *_at(path, fmt, number))


@dataclass(frozen=True)
class OwnFiles(Graded):
    """Documents, questions and (optionally) judgments from your own files, mapped by config. Every question of
    the questions file is ranked; those without a judgment are counted and left out of the means
    (``unjudged: drop`` leaves them out altogether, as a BEIR folder does)."""

    documents: Table
    questions: Table
    judgments: Judgments | None = None
    name: str | None = None  # default: the documents file's name without its ending
    split: str = "test"
    unjudged: str = "keep"
    strict: bool = False
    grades: dict[int, int] | None = None  # grade -> gain (pipeline.data.grades); default: as the judgments hold them
    negative_grades: str = UNJUDGED

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.unjudged not in UNJUDGED_RULES:
            raise InputError(f"corpus.unjudged={self.unjudged}: expected {' or '.join(UNJUDGED_RULES)}")

    def load(self) -> Collection:
        notes = Notes(self.strict)
        documents, doc_metadata = self.documents.read("document", "corpus.documents")
        questions, question_metadata = self.questions.read("question", "corpus.questions")
        judgments = self.judgments or Judgments()
        qrels, spans, lines = judgments.read_spans("corpus.judgments")
        if spans is not None:
            check_spans(spans, lines, documents.ids, documents.texts, judgments.path,
                        _place(file_format(Path(judgments.path), judgments.format, "corpus.judgments")))
        name = self.name or Path(self.documents.path).name.split(".")[0]
        return assemble(name, documents, questions, qrels, judgments=judgments.path or "no judgments",
                        split=self.split, notes=notes, source=str(Path(self.documents.path).resolve()),
                        keep_unjudged=self.unjudged == "keep", metadata=doc_metadata,
                        question_metadata=question_metadata, grading=self.grading,
                        origin={"route": ROUTE, "documents": self.documents.path, "questions": self.questions.path,
                                "judgments": judgments.path or ""}, spans=spans)

    def splits(self) -> list[str]:
        return [self.split]

    def files(self) -> list[Path]:
        """The files a load reads (an InputError when one is missing)."""
        found = [check_file(self.documents.path), check_file(self.questions.path)]
        if self.judgments is not None and self.judgments.path is not None:
            found.append(check_file(self.judgments.path))
        return found

    def with_split(self, split: str) -> OwnFiles:
        return dataclasses.replace(self, split=split)
