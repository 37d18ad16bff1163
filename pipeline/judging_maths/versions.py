"""The next qrels version: the judgments a version had, plus the new ones; a new grade that contradicts an old one is
listed, and the old one kept unless the new ones override. A span judgment version (:func:`next_span_version`) carries
the evidence spans beside the document grades: a pair's new spans come in with its new grade (added, or overriding);
its digest is :func:`metrics.spans.judgments_digest` of both, what a job scored with it records."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from metrics.qrels import Qrels
from metrics.spans import SPAN_HEADER, Spans, covered, judgments_digest

KEY = ["query_id", "doc_id"]


@dataclass(frozen=True)
class Version:
    """A new qrels version and how it came from its parent."""

    qrels: Qrels
    parent: Qrels
    added: int  # pairs the parent did not judge
    confirmed: int  # pairs judged again with the parent's grade
    contradictions: pd.DataFrame  # query_id, doc_id, old, new: pairs judged again with another grade
    overridden: bool  # True: the contradicting new grades replaced the old ones
    spans: Spans | None = None  # a span judgment version's spans (None: documents only)
    parent_spans: Spans | None = None

    @property
    def digest(self) -> str:
        return judgments_digest(self.qrels, self.spans)

    @property
    def parent_digest(self) -> str:
        return judgments_digest(self.parent, self.parent_spans)

    def counts(self) -> dict[str, int]:
        """What the version's record says of it."""
        grades = self.qrels.grades
        found = {"judgments": len(self.qrels), "questions": len(self.qrels.judged_queries()),
                 "relevant": int((grades >= 1).sum()), "added": self.added, "confirmed": self.confirmed,
                 "contradicted": len(self.contradictions),
                 "overridden": len(self.contradictions) if self.overridden else 0}
        if self.spans is not None:
            evidence = self.spans.evidence(1)
            found.update({"spans": len(self.spans), "evidence_characters": sum(
                covered(r) for docs in evidence.values() for r in docs.values())})
        return found


def frame(qrels: Qrels) -> pd.DataFrame:
    return pd.DataFrame({"query_id": qrels.query_ids.astype(str), "doc_id": qrels.doc_ids.astype(str),
                         "grade": qrels.grades.astype(np.int64)})


def next_version(parent: Qrels, judged: pd.DataFrame, override: bool = False) -> Version:
    """``parent`` plus ``judged`` (``query_id``, ``doc_id``, ``grade``: one row per pair, as merged)."""
    old = frame(parent)
    new = judged[[*KEY, "grade"]].astype({"query_id": str, "doc_id": str}).drop_duplicates(KEY, keep="last")
    both = old.merge(new, on=KEY, how="outer", suffixes=("_old", "_new"), indicator=True)
    again = both[both["_merge"] == "both"]
    differ = again[again["grade_old"] != again["grade_new"]]
    contradictions = pd.DataFrame({"query_id": differ["query_id"], "doc_id": differ["doc_id"],
                                   "old": differ["grade_old"].astype(np.int64),
                                   "new": differ["grade_new"].astype(np.int64)}).reset_index(drop=True)
    taken = np.where(both["_merge"] == "left_only", both["grade_old"], both["grade_new"])
    if not override:
        taken = np.where(both["_merge"] == "both", both["grade_old"], taken)
    merged = Qrels(both["query_id"].to_numpy(dtype=object), both["doc_id"].to_numpy(dtype=object),
                   np.asarray(taken, dtype=np.float64).astype(np.int64))
    return Version(merged, parent, int((both["_merge"] == "right_only").sum()), len(again) - len(differ),
                   contradictions, override)


def next_span_version(parent: Qrels, parent_spans: Spans | None, judged: pd.DataFrame, spans: pd.DataFrame,
                      override: bool = False) -> Version:
    """``parent`` (with its spans) plus ``judged`` (one grade per pair, as merged) and their ``spans`` (``query_id``,
    ``doc_id``, ``start``, ``end``, ``grade``): a pair whose new grade is taken (added, or overriding a contradicted
    one) brings its new spans and drops its old ones; every other pair keeps its parent's."""
    documents = next_version(parent, judged, override)
    old = frame(parent)
    before = {(q, d): g for q, d, g in zip(old["query_id"], old["doc_id"], old["grade"])}
    taken = {(str(q), str(d)) for q, d, g in zip(judged["query_id"], judged["doc_id"], judged["grade"])
             if (str(q), str(d)) not in before or (override and before[(str(q), str(d))] != int(g))}
    base = parent_spans if parent_spans is not None else Spans.empty()
    keep = np.array([(str(q), str(d)) not in taken for q, d in zip(base.query_ids, base.doc_ids)], dtype=bool)
    new = spans[[(str(q), str(d)) in taken for q, d in zip(spans["query_id"], spans["doc_id"])]]
    together = Spans(np.concatenate([base.query_ids[keep], new["query_id"].to_numpy(dtype=object)]),
                     np.concatenate([base.doc_ids[keep], new["doc_id"].to_numpy(dtype=object)]),
                     np.concatenate([base.starts[keep], new["start"].to_numpy(dtype=np.int64)]),
                     np.concatenate([base.ends[keep], new["end"].to_numpy(dtype=np.int64)]),
                     np.concatenate([base.grades[keep], new["grade"].to_numpy(dtype=np.int64)]))
    return Version(documents.qrels, parent, documents.added, documents.confirmed, documents.contradictions, override,
                   together, base)


def span_frame(qrels: Qrels, spans: Spans) -> pd.DataFrame:
    """A span judgment version as one table: a row per span, and one per judged pair without a span (``start`` and
    ``end`` empty, NaN): what its MLflow dataset describes."""
    with_spans = set(zip(spans.query_ids.tolist(), spans.doc_ids.tolist()))
    whole = frame(qrels)
    whole = whole[[(q, d) not in with_spans for q, d in zip(whole["query_id"], whole["doc_id"])]]
    rows = pd.DataFrame({"query_id": spans.query_ids.astype(str), "doc_id": spans.doc_ids.astype(str),
                         "grade": spans.grades, "start": spans.starts.astype(np.float64),
                         "end": spans.ends.astype(np.float64)})
    both = pd.concat([rows, whole.assign(start=np.nan, end=np.nan)], ignore_index=True)
    return both.sort_values([*KEY, "start"], kind="stable").reset_index(drop=True)


def beir_span_text(qrels: Qrels, spans: Spans) -> str:
    """A span judgment version as BEIR's qrels TSV with ``start end`` columns (what a job reads back as the same
    judgments: ``corpus=beir``, or own files with ``corpus.judgments.format=qrels``): one line per span, and one
    without offsets for every judged pair without a span."""
    with_spans = set(zip(spans.query_ids.tolist(), spans.doc_ids.tolist()))
    rows = [(str(q), str(d), int(g), str(s), str(e)) for q, d, s, e, g in zip(
        spans.query_ids, spans.doc_ids, spans.starts.tolist(), spans.ends.tolist(), spans.grades.tolist())]
    rows += [(q, d, int(g), "", "") for q, d, g in zip(*(frame(qrels)[c] for c in [*KEY, "grade"]))
             if (q, d) not in with_spans]
    rows.sort(key=lambda r: (r[0], r[1], int(r[3] or -1), int(r[4] or -1)))
    header = "\t".join(("query-id", "corpus-id", "score", *SPAN_HEADER))
    return header + "\n" + "".join("\t".join(map(str, r)) + "\n" for r in rows)


def _sorted(qrels: Qrels) -> pd.DataFrame:
    return frame(qrels).sort_values(KEY, kind="stable")


def trec_text(qrels: Qrels) -> str:
    """TREC qrels lines (``qid 0 docno grade``), by question then document."""
    rows = _sorted(qrels)
    return "".join(f"{q} 0 {d} {g}\n" for q, d, g in zip(rows["query_id"], rows["doc_id"], rows["grade"]))


def beir_text(qrels: Qrels) -> str:
    """BEIR's qrels TSV, header line first."""
    rows = _sorted(qrels)
    return "query-id\tcorpus-id\tscore\n" + "".join(
        f"{q}\t{d}\t{g}\n" for q, d, g in zip(rows["query_id"], rows["doc_id"], rows["grade"]))
