"""A precomputed ranking read from a TREC run file: evaluate a production system's output as it is."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from metrics.run import PAD, Run
from metrics.trec import read_trec_run
from retrievers.base import Documents, Retriever, _check_batch


@dataclass
class RunFile(Retriever):
    """Serves the rankings of ``path`` (trec_eval's order: score desc, docno desc); questions absent from the
    file get empty rankings. Documents the corpus does not hold are counted in ``unknown_docs``."""

    path: str | Path = ""
    name: str = "run_file"

    def index(self, docs: Documents) -> RunFile:
        self._run = read_trec_run(self.path)
        known = set(docs.doc_ids)
        self.unknown_docs = [d for d in self._run.doc_ids.tolist() if d not in known]
        self.doc_ids = self._run.doc_ids
        return self

    def rank(self, query_ids: Sequence[str], texts: Sequence[str], depth: int = 100) -> Run:
        _check_batch(query_ids, texts)
        run = self._run
        rows = pd.Index(run.query_ids).get_indexer(list(query_ids)) if len(run.query_ids) else np.full(
            len(query_ids), -1)
        width = min(depth, run.depth)
        docs = np.full((len(query_ids), width), PAD, dtype=np.int64)
        scores = np.full(docs.shape, np.nan)
        found = rows >= 0
        docs[found] = run.docs[rows[found], :width]
        scores[found] = run.scores[rows[found], :width]
        return Run(np.array(query_ids, dtype=object), run.doc_ids, docs, scores, self.name)
