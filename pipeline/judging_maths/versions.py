"""The next qrels version: the judgments a version had, plus the new ones; a new grade that contradicts an old one is
listed, and the old one kept unless the new ones override."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from metrics.qrels import Qrels

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

    @property
    def digest(self) -> str:
        return self.qrels.digest()

    @property
    def parent_digest(self) -> str:
        return self.parent.digest()

    def counts(self) -> dict[str, int]:
        """What the version's record says of it."""
        grades = self.qrels.grades
        return {"judgments": len(self.qrels), "questions": len(self.qrels.judged_queries()),
                "relevant": int((grades >= 1).sum()), "added": self.added, "confirmed": self.confirmed,
                "contradicted": len(self.contradictions),
                "overridden": len(self.contradictions) if self.overridden else 0}


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
