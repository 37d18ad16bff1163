"""Small search engines of the kind a user plugs in with ``retriever=custom retriever._target_=MODULE.CLASS``."""

from __future__ import annotations

import re


class ListSearch:
    """Scores a document by how many distinct question words it contains (ties: as the engine lists them)."""

    def __init__(self, min_length: int = 3, limit: int | None = None) -> None:
        self.min_length, self.limit = min_length, limit
        self.indexed = 0

    def _words(self, text: str) -> set[str]:
        return {w for w in re.findall(r"[a-z0-9]+", text.lower()) if len(w) >= self.min_length}

    def index(self, doc_ids: list[str], texts: list[str]) -> None:
        self.indexed += 1
        self.docs = [(d, self._words(t)) for d, t in zip(doc_ids, texts)]

    def search(self, questions: list[str], k: int) -> list[list[tuple[str, float]]]:
        out = []
        for question in questions:
            words = self._words(question)
            hits = [(d, float(len(words & terms))) for d, terms in self.docs if words & terms]
            hits.sort(key=lambda h: -h[1])
            out.append(hits[: self.limit or k])
        return out
