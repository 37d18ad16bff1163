"""Collections by name through ir_datasets (https://ir-datasets.com), the field's library: the one module that
imports it, and only when a corpus is read (importing it costs most of a second).

``IrDatasets(id="beir/scifact/test")`` reads that dataset's documents, queries and qrels as ir_datasets serves them:
downloaded on first use into its cache (``IR_DATASETS_HOME``, ``~/.ir_datasets`` by default) and read from there
afterwards, through its own docstore where the dataset has one. Documents stream: only each one's id and the text
of the chosen fields are kept. The result is checked like every other route (:mod:`pipeline.data.assemble`), so the
same data read from a BEIR folder gives the same digests. A file that is neither in the cache nor downloadable, or
one in the cache that is damaged (its md5 not the one ir_datasets expects), is one line saying what to do.
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import logging
import os
import zipfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType, TracebackType
from typing import Any

import numpy as np

from metrics.errors import InputError
from metrics.qrels import Qrels
from pipeline.common import progress
from pipeline.common.redact import one_line
from pipeline.data.assemble import Notes, Records, assemble, join_text, listing
from pipeline.data.collection import Collection
from pipeline.data.grades import UNJUDGED, Graded

ROUTE = "ir_datasets"
DOCUMENT_FIELDS = ("title", "text")  # joined in this order where a dataset's documents have both
QUERY_FIELD = "text"
REPEATED_JUDGMENTS = "judgments_repeated"  # note kind: a pair judged twice by the dataset itself (the last kept)
HINT = "e.g. beir/scifact/test, msmarco-passage/trec-dl-2019/judged, vaswani, antique/test"


def library() -> ModuleType:
    """ir_datasets, imported with its logging quiet: rankscope says in one line what went wrong."""
    try:
        import ir_datasets
    except ImportError:
        raise InputError("a collection by name needs the ir_datasets package: pip install ir-datasets") from None
    logger = ir_datasets.log.easy().logger()  # made (at level INFO) on first use: then set its level
    logger.setLevel(logging.ERROR)
    return ir_datasets


def home() -> Path:
    """Where ir_datasets keeps its downloads and docstores."""
    return Path(os.environ.get("IR_DATASETS_HOME", Path.home() / ".ir_datasets"))


def known_ids() -> list[str]:
    return list(library().registry)


def dataset_of(dataset_id: str) -> Any:
    """The registered dataset, or one line naming the closest ids."""
    irds = library()
    try:
        return irds.load(dataset_id)
    except KeyError:
        close = difflib.get_close_matches(dataset_id, known_ids(), n=3, cutoff=0.6)
        hint = f"did you mean {' or '.join(close)}?" if close else f"ids look like {HINT}"
        raise InputError(f"corpus.id={dataset_id}: ir_datasets has no dataset of that id ({hint}; all ids: "
                         f"python -m ir_datasets list)") from None


def split_of(dataset_id: str) -> str | None:
    """The id's last part when it names a split of a registered parent (``beir/scifact/test`` -> ``test``)."""
    parent, _, last = dataset_id.rpartition("/")
    return last if parent and parent in set(known_ids()) else None


def with_split(dataset_id: str, split: str | None) -> str:
    """The id a split asks for: the id itself (no split, its own, or ``test`` of a dataset without splits); a child
    (``beir/scifact`` + ``test``); or a sibling (``beir/scifact/test`` + ``train``). Anything else is one line
    naming the splits there are."""
    if not split or split == split_of(dataset_id):
        return dataset_id
    ids = set(known_ids())
    if f"{dataset_id}/{split}" in ids:
        return f"{dataset_id}/{split}"
    parent = dataset_id.rpartition("/")[0]
    if parent and f"{parent}/{split}" in ids:
        return f"{parent}/{split}"
    if split == "test":  # the default split of a dataset that has none (vaswani, cranfield)
        return dataset_id
    raise InputError(f"corpus.split={split}: {dataset_id} has no split of that name (splits: "
                     f"{', '.join(splits_of(dataset_id)) or 'none'})")


def splits_of(dataset_id: str) -> list[str]:
    """The splits beside (or below) an id that have judgments: what ``corpus.split`` may name."""
    parent = dataset_id.rpartition("/")[0] if split_of(dataset_id) else dataset_id
    children = [i for i in known_ids() if i.rpartition("/")[0] == parent]
    found = sorted(i.rpartition("/")[2] for i in children if _has(i, "qrels"))
    return found or (["test"] if _has(dataset_id, "qrels") else [])


def _has(dataset_id: str, what: str) -> bool:
    try:
        return bool(getattr(library().load(dataset_id), f"has_{what}")())
    except Exception:  # a dataset that fails to build its handlers has nothing usable
        return False


def check(dataset_id: str) -> Any:
    """The dataset, refused in one line unless it has documents, queries and qrels."""
    dataset = dataset_of(dataset_id)
    lacks = [what for what in ("docs", "queries", "qrels") if not getattr(dataset, f"has_{what}")()]
    if lacks:
        with_all = [i for i in known_ids() if i.startswith(f"{dataset_id}/") and all(_has(i, w) for w in
                                                                                      ("docs", "queries", "qrels"))]
        hint = f" (these have all three: {listing(with_all)})" if with_all else ""
        raise InputError(f"corpus.id={dataset_id}: the dataset has no {' and no '.join(lacks)} in ir_datasets, and "
                         f"rankscope needs documents, queries and qrels{hint}")
    return dataset


def _fields(cls: type, chosen: Sequence[str] | None, what: str, key: str) -> list[str] | None:
    """The fields read for a text: ``chosen`` (each checked), else the default; None means the record's own
    ``default_text()``."""
    have = list(getattr(cls, "_fields", ()))
    if chosen:
        unknown = [f for f in chosen if f not in have]
        if unknown:
            raise InputError(f"{key}: {what} of this dataset have no field {', '.join(unknown)} (fields: "
                             f"{', '.join(f for f in have if not f.endswith('_id'))})")
        return list(chosen)
    if what == "documents":
        both = [f for f in DOCUMENT_FIELDS if f in have]
        return both if both else None
    return [QUERY_FIELD] if QUERY_FIELD in have else None


def _texts(records: Iterator[Any], id_field: str, fields: list[str] | None) -> Iterator[tuple[int, str, str]]:
    for number, record in enumerate(records, 1):
        parts = [getattr(record, f) for f in fields] if fields else [record.default_text()]
        yield number, str(getattr(record, id_field)), join_text(str(p) for p in parts if p is not None)


def read_qrels(dataset: Any, where: str, notes: Notes) -> Qrels:
    """The dataset's judgments, grades as given (a grading applies later, in :func:`assemble`); a pair the dataset
    judges twice keeps its last grade, and is noted."""
    rows = [(str(q.query_id), str(q.doc_id), int(q.relevance)) for q in dataset.qrels_iter()]
    if not rows:
        return Qrels.from_dict({})
    q, d, g = (np.array(column, dtype=object) for column in zip(*rows))
    pairs = np.array([f"{a}/{b}" for a, b, _ in rows], dtype=object)
    _, last_from_end = np.unique(pairs[::-1].astype(str), return_index=True)
    keep = np.sort(len(pairs) - 1 - last_from_end)  # each pair's last judgment
    if len(keep) < len(pairs):
        dropped = np.ones(len(pairs), dtype=bool)
        dropped[keep] = False
        repeated = list(dict.fromkeys(pairs[dropped].tolist()))
        notes.add(f"{where}: {int(dropped.sum())} judgment(s) repeat a (question/document) pair: {listing(repeated)}",
                  REPEATED_JUDGMENTS, repeated, int(dropped.sum()), "(the last grade kept)")
    return Qrels(q[keep], d[keep], g[keep].astype(np.int64))


def missing_data(dataset_id: str, exc: BaseException) -> InputError | None:
    """One line for data that is neither in ir_datasets' cache nor downloadable here: the file, where it is
    expected, and how to get it. None when ``exc`` is not a failed download."""
    download = _failed_download(exc.__traceback__)
    if download is None:
        return None
    target = getattr(download, "_cache_path", None) or "its downloads folder"
    urls = [u for u in (getattr(m, "url", None) for m in getattr(download, "mirrors", [])) if u]
    if not urls:  # a file the dataset's terms require you to obtain yourself: ir_datasets says how
        return InputError(f"corpus.id={dataset_id}: the data is not on this machine: {one_line(exc)}")
    name = Path(str(target)).name
    return InputError(f"corpus.id={dataset_id}: the data is not on this machine and could not be downloaded: "
                      f"ir_datasets expects {urls[0]} at {target} (IR_DATASETS_HOME="
                      f"{home()}). Where there is network, run 'curl -L -o {name} {urls[0]}' and copy {name} to "
                      f"{target}")


def damaged_file(dataset_id: str, exc: BaseException) -> InputError | None:
    """One line for a file in ir_datasets' cache that is not what it downloaded (a truncated archive, an HTML error
    page saved in its place): the file, its md5 against the one ir_datasets expects, and what to do. None when no
    cached file is behind ``exc``, or the one there is intact."""
    download = _download_read(exc.__traceback__)
    cached = getattr(download, "_cache_path", None)
    if download is None or not cached or not Path(cached).is_file():
        return None
    path, expected = Path(cached), getattr(download, "expected_md5", None)
    found = _md5(path)
    if found == expected:  # the file is the one published: something else went wrong
        return None
    head = path.open("rb").read(256).lstrip().lower()
    kind = ", an HTML page" if head.startswith((b"<!doctype html", b"<html", b"<?xml", b"<head")) else ""
    urls = [u for u in (getattr(m, "url", None) for m in getattr(download, "mirrors", [])) if u]
    fetch = (f" (without network here: run 'curl -L -o {path.name} {urls[0]}' on a machine with it, and copy "
             f"{path.name} to {path})") if urls else ""
    size = getattr(download, "_size_hint", None)
    what = (f"ir_datasets expects md5 {expected}" + (f", about {size:,} bytes" if size else "") if expected
            else "ir_datasets knows no md5 to check it against")
    return InputError(f"corpus.id={dataset_id}: ir_datasets' cached file {path} is damaged ({path.stat().st_size:,} "
                      f"bytes{kind}, md5 {found}; {what}; reading it failed with {type(exc).__name__}: "
                      f"{one_line(exc)}): delete it and run again to download it anew{fetch}")


def _md5(path: Path) -> str:
    digest = hashlib.md5(usedforsecurity=False)
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _download_read(tb: TracebackType | None) -> Any:
    """The ir_datasets Download whose cached file was being read when ``tb`` was raised: reached from the innermost
    frame whose object wraps one (a TarExtract, a ZipExtractCache, a Cache ... through ``_streamer`` or ``dlc``)."""
    found = None
    while tb is not None:
        owner = tb.tb_frame.f_locals.get("self")
        for _ in range(8):  # a short chain of wrappers at most
            if owner is None or _is_download(owner):
                break
            owner = next((getattr(owner, a) for a in WRAPPED if getattr(owner, a, None) is not None), None)
        if owner is not None and _is_download(owner):
            found = owner
        tb = tb.tb_next
    return found


WRAPPED = ("_streamer", "dlc", "_dlc", "streamer")  # how ir_datasets' file wrappers hold what they read


def _is_download(owner: Any) -> bool:
    return type(owner).__name__ == "Download" and hasattr(owner, "mirrors")


def read_errors() -> tuple[type[BaseException], ...]:
    """What a damaged or missing file raises while ir_datasets reads it (its modules imported only on this path)."""
    import lzma
    import tarfile
    import zlib

    return OSError, RuntimeError, EOFError, zipfile.BadZipFile, tarfile.TarError, zlib.error, lzma.LZMAError


def _failed_download(tb: TracebackType | None) -> Any:
    """The ir_datasets Download whose fetch raised, found in the traceback's frames (the innermost one)."""
    found = None
    while tb is not None:
        owner = tb.tb_frame.f_locals.get("self")
        if type(owner).__name__ == "Download" and hasattr(owner, "mirrors"):
            found = owner
        tb = tb.tb_next
    return found


@dataclass(frozen=True)
class IrDatasets(Graded):
    """A collection by its ir_datasets id. ``split`` picks a sibling or child id (``beir/scifact/test`` with split
    ``train`` reads ``beir/scifact/train``); ``doc_fields`` are joined in order into a document's text (default:
    title and text where both exist, else text, else the record's own default text); ``query_field`` is the
    question (default: text, else the query's default text, e.g. a TREC topic's title)."""

    id: str
    split: str | None = None
    name: str | None = None  # default: the dataset id
    doc_fields: list[str] | None = None
    query_field: str | None = None
    strict: bool = False
    grades: dict[int, int] | None = None  # grade -> gain (pipeline.data.grades); default: as the dataset gives them
    negative_grades: str = UNJUDGED

    @property
    def dataset_id(self) -> str:
        return with_split(self.id, self.split)

    def load(self) -> Collection:
        dataset_id = self.dataset_id
        dataset = check(dataset_id)
        notes = Notes(self.strict)
        try:
            return self._read(dataset, dataset_id, notes)
        except Exception as exc:
            if not isinstance(exc, read_errors()):  # not the data: a fault of rankscope or ir_datasets, in full
                raise
            found = damaged_file(dataset_id, exc) or missing_data(dataset_id, exc)
            if found is not None:
                raise found from None
            raise InputError(f"corpus.id={dataset_id}: ir_datasets could not read it ({type(exc).__name__}: "
                             f"{exc})") from None

    def _read(self, dataset: Any, dataset_id: str, notes: Notes) -> Collection:
        where = f"{ROUTE}:{dataset_id}"
        qrels = read_qrels(dataset, f"{where} qrels", notes)  # the smallest file first: a missing download
        query_fields = _fields(dataset.queries_cls(), [self.query_field] if self.query_field else None, "queries",
                               "corpus.query_field")
        questions = Records.read(_texts(dataset.queries_iter(), "query_id", query_fields), "question",
                                 f"{where} queries", place="record")
        doc_fields = _fields(dataset.docs_cls(), self.doc_fields, "documents", "corpus.doc_fields")
        count = _count(dataset)
        docs = progress.iterate(dataset.docs_iter(), count, f"reading {dataset_id}", "doc")
        documents = Records.read(_texts(docs, "doc_id", doc_fields), "document", f"{where} docs", place="record")
        split = self.split or split_of(dataset_id) or "test"
        return assemble(self.name or dataset_id, documents, questions, qrels, judgments=f"{where} qrels",
                        split=split, notes=notes, source=where, grading=self.grading,
                        origin={"route": ROUTE, "id": dataset_id, "doc_fields": ",".join(doc_fields or ["default"]),
                                "query_field": ",".join(query_fields or ["default"])})

    def splits(self) -> list[str]:
        return splits_of(self.id)

    def files(self) -> list[Path]:
        """Nothing to watch: an id names fixed data (ir_datasets never changes a dataset under its id)."""
        return []

    def with_split(self, split: str) -> IrDatasets:
        return dataclasses.replace(self, split=split)


def _count(dataset: Any) -> int | None:
    try:
        return dataset.docs_count()
    except Exception:
        return None
