"""A vector search engine as your own retriever: faiss (``pip install faiss-cpu``) over rankscope's dense embeddings.

``retriever=custom retriever._target_=tests.pipeline.config.faiss_engine.FaissSearch +retriever.kind=hnsw``

The vectors are :class:`retrievers.dense.Dense`'s (all-MiniLM-L6-v2, int8 ONNX; unit length, cached per corpus),
so ``kind=flat`` (exact inner product) ranks as ``retriever=dense`` does, and ``kind=hnsw`` or ``kind=ivf`` show
what an approximate index costs: measure the gap with ``python -m pipeline.compare``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

KINDS = ("flat", "hnsw", "ivf")


@dataclass
class _Docs:
    doc_ids: list[str]
    doc_texts: list[str]


class FaissSearch:
    """Exact (``flat``) or approximate (``hnsw``: a graph, ``m`` links per node, ``ef_search`` candidates per
    question; ``ivf``: ``nlist`` clusters, ``nprobe`` searched per question) inner-product search."""

    def __init__(self, kind: str = "hnsw", m: int = 32, ef_construction: int = 40, ef_search: int = 16,
                 nlist: int = 64, nprobe: int = 1) -> None:
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
        self.kind, self.m, self.ef_construction, self.ef_search = kind, m, ef_construction, ef_search
        self.nlist, self.nprobe = nlist, nprobe

    def index(self, doc_ids: list[str], texts: list[str]) -> None:
        import faiss

        from retrievers.dense import Dense

        faiss.omp_set_num_threads(1)  # graph and clusters built the same way in every process
        self.dense = Dense().index(_Docs(doc_ids, texts))
        vectors = np.ascontiguousarray(self.dense.doc_vectors, dtype=np.float32)
        dim = vectors.shape[1]
        if self.kind == "flat":
            self.engine = faiss.IndexFlatIP(dim)
        elif self.kind == "hnsw":
            self.engine = faiss.IndexHNSWFlat(dim, self.m, faiss.METRIC_INNER_PRODUCT)
            self.engine.hnsw.efConstruction = self.ef_construction
            self.engine.hnsw.efSearch = self.ef_search
        else:
            self.engine = faiss.IndexIVFFlat(faiss.IndexFlatIP(dim), dim, min(self.nlist, len(vectors)),
                                             faiss.METRIC_INNER_PRODUCT)
            self.engine.train(vectors)
            self.engine.nprobe = self.nprobe
        self.engine.add(vectors)

    def search(self, questions: list[str], k: int) -> list[list[tuple[str, float]]]:
        vectors = np.ascontiguousarray(self.dense.encode_questions(questions), dtype=np.float32)
        scores, rows = self.engine.search(vectors, min(k, self.engine.ntotal))
        ids = self.dense.doc_ids
        return [[(str(ids[r]), float(s)) for r, s in zip(found, values) if r >= 0]
                for found, values in zip(rows, scores)]
