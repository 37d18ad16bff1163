"""Small search engines of the kind a user plugs in with ``retriever=custom retriever._target_=MODULE.CLASS``."""

from __future__ import annotations

import re
from typing import Any

from metrics.run import Run
from retrievers.base import Retriever


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


class TantivySearch:
    """BM25 by tantivy, a real search engine from the package index (``pip install tantivy``), wrapped in the
    protocol: the index is built in memory on ``index()``, each question is one disjunction of its analysed words.

    One indexing thread, so documents keep the corpus's order and ties break the same way in every process.
    """

    def __init__(self, stem: bool = True) -> None:
        self.stem = stem
        self.indexed = 0

    def _analyzer(self):
        import tantivy

        builder = tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple()).filter(tantivy.Filter.remove_long(40))
        builder = builder.filter(tantivy.Filter.lowercase())
        return (builder.filter(tantivy.Filter.stemmer("english")) if self.stem else builder).build()

    def index(self, doc_ids: list[str], texts: list[str]) -> None:
        import tantivy

        self.indexed += 1
        schema = tantivy.SchemaBuilder()
        schema.add_text_field("id", stored=True, tokenizer_name="raw")
        schema.add_text_field("body", tokenizer_name="words")
        self.schema = schema.build()
        self.engine = tantivy.Index(self.schema)
        self.engine.register_tokenizer("words", self._analyzer())
        writer = self.engine.writer(heap_size=50_000_000, num_threads=1)
        for doc, text in zip(doc_ids, texts):
            writer.add_document(tantivy.Document(id=doc, body=text))
        writer.commit()
        writer.wait_merging_threads()
        self.engine.reload()
        self.analyzer = self._analyzer()

    def search(self, questions: list[str], k: int) -> list[list[tuple[str, float]]]:
        import tantivy

        searcher = self.engine.searcher()
        out = []
        for question in questions:
            words = dict.fromkeys(self.analyzer.analyze(question))
            if not words:
                out.append([])
                continue
            query = tantivy.Query.boolean_query(
                [(tantivy.Occur.Should, tantivy.Query.term_query(self.schema, "body", word)) for word in words])
            hits = searcher.search(query, k).hits
            out.append([(searcher.doc(address)["id"][0], float(score)) for score, address in hits])
        return out


class SameListSearch(ListSearch):
    """:class:`ListSearch` under another name: another class, so another config, even with the same results."""


class CollectorProbe(ListSearch):
    """:class:`ListSearch` that, when the job indexes, writes the garbage collector's state (enabled, objects
    frozen) to the file named by ``RANKSCOPE_TEST_COLLECTOR``: what a job runs with."""

    def index(self, doc_ids: list[str], texts: list[str]) -> None:
        import gc
        import json
        import os

        with open(os.environ["RANKSCOPE_TEST_COLLECTOR"], "a", encoding="utf-8") as f:
            f.write(json.dumps({"enabled": gc.isenabled(), "frozen": gc.get_freeze_count()}) + "\n")
        super().index(doc_ids, texts)



class KeyedSearch(ListSearch):
    """:class:`ListSearch` with a setting of the kind a user's class has: a key to its service."""

    def __init__(self, api_key: str = "", min_length: int = 3) -> None:
        super().__init__(min_length)
        self.api_key = api_key

class EmptyFor(ListSearch):
    """:class:`ListSearch` that answers an empty list for the questions containing ``word`` (every question when
    ``word`` is empty): the engine found nothing, or filtered everything out."""

    def __init__(self, word: str = "", min_length: int = 3) -> None:
        super().__init__(min_length)
        self.word = word

    def search(self, questions: list[str], k: int) -> list[list[tuple[str, float]]]:
        hits = super().search(questions, k)
        return [[] if self.word in question else found for question, found in zip(questions, hits)]


class OtherIds(ListSearch):
    """:class:`ListSearch` answering with ids of another collection (``doc-<id>``): none is in the corpus."""

    def search(self, questions: list[str], k: int) -> list[list[tuple[str, float]]]:
        return [[(f"doc-{d}", s) for d, s in found] for found in super().search(questions, k)]


class RaisesOn(ListSearch):
    """:class:`ListSearch` whose ``search`` raises a ``KeyError`` for any batch holding a question with ``word``: a
    bug in the user's own code, which rankscope must report without crashing."""

    def __init__(self, word: str = "credentials", min_length: int = 3) -> None:
        super().__init__(min_length)
        self.word = word

    def search(self, questions: list[str], k: int) -> list[list[tuple[str, float]]]:
        for question in questions:
            if self.word in question:
                lookup: dict[str, int] = {}
                lookup[question]  # the bug: a question the engine's own table lacks
        return super().search(questions, k)



class Raising(Retriever):
    """A user's own :class:`retrievers.Retriever` subclass (the richer protocol) whose ``rank`` raises for a batch
    holding a question with "credentials"."""

    name = "raising"

    def index(self, docs: Any) -> Raising:
        self.doc_ids = list(docs.doc_ids)
        return self

    def rank(self, query_ids: Any, texts: Any, depth: int = 100) -> Run:
        if any("credentials" in t for t in texts):
            raise ZeroDivisionError("division by zero in the user's scorer")
        return Run.from_rankings({q: [(d, 1.0) for d in self.doc_ids[:depth]] for q in query_ids}, self.name)
