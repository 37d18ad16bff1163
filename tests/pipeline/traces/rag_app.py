"""A small RAG application instrumented with real MLflow Tracing, as a team would have it in production.

``answer(question)`` is the traced entry point (its root span's input is the question); it calls ``retrieve``, a
``RETRIEVER`` span over a real search engine (tantivy, :class:`tests.pipeline.config.engines.TantivySearch`) that
returns ``mlflow.entities.Document`` s with the corpus id in ``metadata.doc_uri`` and tantivy's score in
``metadata.score``, then ``generate``, an ``LLM`` span that stands in for the generator. Each trace is tagged with the
application's version (``app_version``). Run as a process, it answers every question of a corpus into a store::

    python -m tests.pipeline.traces.rag_app sqlite:////tmp/mlflow.db rag-app:v1 rag-app:v2:nostem [--corpus FOLDER]

Each ``EXPERIMENT:VERSION`` answers every question once; ``nostem`` builds the index without stemming (another
version of the application), ``first=N`` answers only the first N questions, ``outside`` one more that the corpus
does not hold, and a shape makes the traces the checks need: ``no_span`` (no retrieval span), ``not_documents`` (the
retriever returns plain strings), ``unknown_ids`` (every third document with an id the corpus does not hold),
``failing`` (every fourth call raises), ``raising`` (every fourth retrieval raises, the application catches it and
answers without documents), ``empty`` (every fifth retrieval returns ``[]``), ``chunk_ids`` (``Document.id`` is a
chunk's id, ``chunk-12-0``, and ``metadata.doc_uri`` the corpus id), ``uris`` (MLflow's convention:
``Document.id`` is the corpus id and ``metadata.doc_uri`` the document's URL), ``chunks`` (the application cuts
each document into paragraphs, :class:`tests.pipeline.chunking.own.Paragraphs`, searches those and returns each as a
``Document`` with ``metadata.doc_uri`` and LangChain's ``metadata.start_index``), ``chunk_texts`` (the same chunks,
their offsets left out: only ``page_content`` says where they are). ``--k`` is how many documents it retrieves.
"""

from __future__ import annotations

import argparse
import contextlib
import os
from collections.abc import Sequence
from pathlib import Path

SHAPES = ("normal", "no_span", "not_documents", "unknown_ids", "failing", "raising", "empty", "chunk_ids", "uris",
          "chunks", "chunk_texts")
SITE = "https://help.example.com/articles/"  # the ``uris`` shape's document URLs: SITE + the corpus id


class RagApp:
    """The application: index once, then answer questions; every answer is one trace."""

    def __init__(self, doc_ids: Sequence[str], texts: Sequence[str], version: str, k: int = 10, stem: bool = True,
                 shape: str = "normal") -> None:
        from tests.pipeline.config.engines import TantivySearch

        self.engine = TantivySearch(stem=stem)
        self.engine.index(list(doc_ids), list(texts))
        self.texts = dict(zip(doc_ids, texts))
        self.numbers = {doc: n for n, doc in enumerate(doc_ids)}
        self.version, self.k, self.shape = version, k, shape
        self.calls = 0

    def run(self, questions: Sequence[str]) -> None:
        import mlflow
        from mlflow.entities import Document, SpanType

        @mlflow.trace(span_type=SpanType.RETRIEVER)
        def retrieve(query: str, k: int) -> list:
            if self.shape in ("chunks", "chunk_texts"):
                return self.chunk_hits(query, k, Document)
            hits = self.engine.search([query], k)[0]
            if self.shape == "not_documents":
                return [doc for doc, _ in hits]
            if self.shape == "raising" and self.calls % 4 == 0:
                raise ConnectionError("the search index did not answer")
            if self.shape == "empty" and self.calls % 5 == 0:
                return []
            if self.shape == "chunk_ids":
                return [Document(page_content=self.texts[doc], metadata={"doc_uri": doc, "score": score},
                                 id=f"chunk-{self.numbers[doc]}-0") for doc, score in hits]
            if self.shape == "uris":
                return [Document(page_content=self.texts[doc], metadata={"doc_uri": SITE + doc, "score": score},
                                 id=doc) for doc, score in hits]
            return [Document(page_content=self.texts[doc], metadata={
                "doc_uri": ("missing-" if self.shape == "unknown_ids" and rank % 3 == 2 else "") + doc,
                "score": score}) for rank, (doc, score) in enumerate(hits)]

        @mlflow.trace(name="search", span_type=SpanType.TOOL)
        def search_without_retriever_span(query: str, k: int) -> list:
            return [doc for doc, _ in self.engine.search([query], k)[0]]

        @mlflow.trace(span_type=SpanType.LLM)
        def generate(question: str, context: list) -> str:
            if self.shape == "failing" and self.calls % 4 == 0:
                raise RuntimeError("the generator timed out")
            first = context[0].page_content if context and hasattr(context[0], "page_content") else ""
            return first.split(". ")[0]

        @mlflow.trace
        def answer(question: str) -> str:
            self.calls += 1
            mlflow.update_current_trace(tags={"app_version": self.version})
            if self.shape == "no_span":
                context = search_without_retriever_span(question, self.k)
            else:
                try:
                    context = retrieve(question, self.k)
                except ConnectionError:  # the application answers without documents; its trace finishes OK
                    context = []
            return generate(question, context)

        for question in questions:
            with contextlib.suppress(RuntimeError):  # the trace records the failure; the application goes on
                answer(question)


    def chunk_hits(self, query: str, k: int, document: type) -> list:
        """The top k paragraphs, as a chunking application returns them (offsets in metadata, or none)."""
        if not hasattr(self, "chunk_engine"):
            from tests.pipeline.chunking.own import Paragraphs
            from tests.pipeline.config.engines import TantivySearch

            self.chunks = {f"{doc}-chunk-{n}": (doc, start, end) for doc, text in self.texts.items()
                           for n, (start, end, _) in enumerate(Paragraphs().chunk(text))}
            self.chunk_engine = TantivySearch()
            self.chunk_engine.index(list(self.chunks), [self.texts[d][s:e] for d, s, e in self.chunks.values()])
        found = []
        for ident, score in self.chunk_engine.search([query], k)[0]:
            doc, start, end = self.chunks[ident]
            metadata = {"doc_uri": doc, "score": score}
            if self.shape == "chunks":
                metadata["start_index"] = start
            found.append(document(page_content=self.texts[doc][start:end], metadata=metadata, id=ident))
        return found


OUTSIDE = "what is the weather in Lisbon today"  # a question the help-desk corpus does not hold


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.pipeline.traces.rag_app")
    p.add_argument("store")
    p.add_argument("serve", nargs="+", metavar="EXPERIMENT:VERSION[:OPTION...]",
                   help="answer the questions into EXPERIMENT as VERSION (repeatable: several runs of the app); "
                        "options: a shape, nostem, first=N (only the first N questions), outside (also one question "
                        "the corpus does not hold)")
    p.add_argument("--corpus", type=Path, help="a BEIR folder (default: the embedded help-desk corpus)")
    p.add_argument("--split", default="test")
    p.add_argument("--k", type=int, default=10)
    args = p.parse_args(argv)
    from pipeline.data import helpdesk, load_beir

    collection = helpdesk() if args.corpus is None else load_beir(args.corpus, args.split, None, False)
    os.environ["MLFLOW_ENABLE_ASYNC_TRACE_LOGGING"] = "false"  # each trace is in the store when answer() returns
    import mlflow

    mlflow.set_tracking_uri(args.store)
    apps: dict[bool, RagApp] = {}
    for spec in args.serve:
        experiment, version, *options = spec.split(":")
        stem = "nostem" not in options
        if stem not in apps:
            apps[stem] = RagApp(collection.doc_ids, collection.doc_texts, version, args.k, stem)
        app = apps[stem]
        app.version, app.shape, app.calls = version, next((o for o in options if o in SHAPES), "normal"), 0
        first = next((int(o.removeprefix("first=")) for o in options if o.startswith("first=")), None)
        questions = list(collection.query_texts[:first]) + ([OUTSIDE] if "outside" in options else [])
        mlflow.set_experiment(experiment)
        app.run(questions)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
