"""A pool read back from its folder (``pool.csv``, ``pool.json``, the base version's qrels and spans): what ``pull``
and ``adjudicate`` check every grade and highlight against."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from metrics.errors import InputError
from metrics.qrels import Qrels
from metrics.spans import Spans, judgments_digest, read_spans, spans_bytes
from pipeline.common.jsonfile import read_json
from pipeline.common.names import POOL_FILE, POOL_META, QRELS_TREC, SPANS_FILE
from pipeline.judging_maths.versions import trec_text

BASE_FILE = "base_" + QRELS_TREC  # the version the pool was made against, in the pool's folder
BASE_SPANS = "base_" + SPANS_FILE  # ... and its spans, for a span pool whose base has any


def write_whole(path: Path, text: str) -> None:
    """``path`` written whole (a partial file moved into place)."""
    partial = path.with_name(path.name + ".partial")
    partial.write_text(text, encoding="utf-8")
    partial.replace(path)


def write_base(folder: Path, qrels: Qrels, spans: Spans | None) -> str:
    """The version a pool was made against, in its folder (its spans too, when it has any); its digest."""
    write_whole(folder / BASE_FILE, trec_text(qrels))
    if spans is not None and len(spans):
        write_whole(folder / BASE_SPANS, spans_bytes(spans).decode("utf-8"))
    else:
        (folder / BASE_SPANS).unlink(missing_ok=True)  # an earlier pool's, in the same folder
    return judgments_digest(qrels, spans)


@dataclass
class SavedPool:
    """A pool read back from its folder."""

    folder: Path
    meta: dict[str, Any]
    pairs: pd.DataFrame

    @property
    def keys(self) -> set[tuple[str, str]]:
        return set(zip(self.pairs["query_id"], self.pairs["doc_id"]))

    def base(self) -> Qrels:
        from metrics.trec import read_qrels

        return read_qrels(self.folder / self.meta["base_file"])

    def project_title(self, given: str | None = None) -> str:
        """The pool's Label Studio project: ``given`` (``--project``), else the title it was pushed under, else its
        name."""
        return given or (self.meta.get("label_studio") or {}).get("project") or self.meta["name"]

    @property
    def spans(self) -> bool:
        """A span pool (its tasks judge evidence spans)."""
        return bool(self.meta.get("spans"))

    def base_spans(self) -> Spans | None:
        """The base version's spans (None: none, or not a span pool)."""
        path = self.folder / BASE_SPANS
        return read_spans(path) if self.spans and path.is_file() else (Spans.empty() if self.spans else None)

    @property
    def digests(self) -> dict[str, str]:
        """Each pooled document's digest when it was pooled."""
        if "doc_digest" not in self.pairs:
            return {}
        return dict(zip(self.pairs["doc_id"], self.pairs["doc_digest"]))


def load_pool(folder: Path) -> SavedPool:
    meta = read_json(folder / POOL_META)
    if meta is None or not (folder / POOL_FILE).is_file():
        raise InputError(f"no pool in {folder} (python -m pipeline.judge pool ... --out {folder} makes one)")
    pairs = pd.read_csv(folder / POOL_FILE, dtype={"query_id": str, "doc_id": str, "doc_digest": str},
                        keep_default_na=False)
    return SavedPool(folder, meta, pairs)
