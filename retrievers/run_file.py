"""A precomputed ranking read from a TREC run file: evaluate a production system's output as it is."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from metrics.errors import InputError, Note
from metrics.run import Run
from metrics.trec import NO_RESULTS_DOC, NO_RESULTS_QUERY, read_trec_run
from retrievers.base import BuildContext, Documents, Retriever, _check_batch, select_rows
from retrievers.external import SHOWN, listing


@dataclass
class RunFile(Retriever):
    """Serves the rankings of ``path`` (trec_eval's order: score desc, docno desc); questions absent from the
    file get empty rankings. Documents the corpus does not hold are listed in ``unknown_docs`` and :meth:`notes`."""

    path: str | Path = ""
    name: str = "run_file"

    @classmethod
    def from_config(cls, context: BuildContext, path: str, name: str = "run_file") -> RunFile:
        """The file named in the config entry, relative to the launch folder; it must exist before any work."""
        found = context.path(path)
        if not found.is_file():
            raise InputError("run file does not exist (retriever.path)", found)
        return cls(path=found, name=name)

    def notes(self) -> list[str]:
        unknown = getattr(self, "unknown_docs", [])
        if not unknown:
            return []
        return [Note(f"{self.path}: {len(unknown)} document id(s) are not in the corpus: {listing(unknown)} (they "
                     f"count as retrieved and not relevant)", "run_unknown_document", len(unknown), unknown[:SHOWN])]

    def index(self, docs: Documents) -> RunFile:
        self._run = read_trec_run(self.path)
        known = set(docs.doc_ids)
        if self._run.query_ids.tolist() == [NO_RESULTS_QUERY]:  # a job's run.trec that retrieved nothing
            known.add(NO_RESULTS_DOC)
        self.unknown_docs = [d for d in self._run.doc_ids.tolist() if d not in known]
        self.doc_ids = self._run.doc_ids
        return self

    def rank(self, query_ids: Sequence[str], texts: Sequence[str], depth: int = 100) -> Run:
        _check_batch(query_ids, texts)
        return select_rows(self._run, query_ids, depth, self.name)
