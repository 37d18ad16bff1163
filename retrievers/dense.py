"""Dense retrieval: documents and questions embedded by a sentence-embedding model, ranked by cosine.

A :class:`ScoringRetriever`, so the weighted and RRF fusions take it as a component (BM25 + dense) and
:class:`retrievers.rerank.Rerank` can use it as a second stage. Document embeddings are cached on disk per
(corpus, model, settings) by :mod:`retrievers.embedding_cache`: a sweep encodes a corpus once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from retrievers.base import BuildContext, Documents, NotIndexedError, ScoringRetriever, corpus_digest
from retrievers.cache import cache_root
from retrievers.embedding_cache import EMBEDDINGS, EmbeddingCache
from retrievers.encoders import DEFAULT_MODEL, Encoder, check_available, load_encoder


@dataclass
class Dense(ScoringRetriever):
    """Cosine similarity between question and document embeddings (a bi-encoder).

    ``model``: ``"minilm-int8"`` (default, offline ONNX), a ``.onnx`` path, or any sentence-transformers name
    or folder (see :func:`retrievers.encoders.load_encoder`). ``max_length`` truncates texts in word pieces
    (None: 256 for the ONNX route, the model's own limit for sentence-transformers). ``cache_dir`` None means
    ``<cache folder>/embeddings``; ``cache=False`` encodes every time. As everywhere in rankscope, a cosine not
    above 1e-9 is not a result. ``encoded_documents`` counts documents actually run through the model (0 after
    a cache hit). ``batch_size`` only trades memory for speed: it does not change a vector, so it is not part
    of the cache key.
    """

    model: str = DEFAULT_MODEL
    max_length: int | None = None
    batch_size: int = 32
    cache: bool = True
    cache_dir: str | Path | None = None
    tokenizer: str | None = None
    name: str = "dense"
    encoded_documents: int = field(default=0, init=False)
    context_fields = ("cache", "cache_dir")

    @classmethod
    def from_config(cls, context: BuildContext, model: str = DEFAULT_MODEL, tokenizer: str | None = None,
                    **settings) -> Dense:
        """A model file or folder is read relative to the launch folder; without the ``[dense]`` extra (or torch for
        a sentence-transformers model), the one-line install hint comes before any data is read."""
        local = context.path(model)
        if model.endswith(".onnx") or local.exists():
            model = str(local)
        check_available(model)
        root = context.cache_dir if context.cache_dir is not None else cache_root()
        return cls(model=model, tokenizer=None if tokenizer is None else str(context.path(tokenizer)),
                   cache=context.cache, cache_dir=root / EMBEDDINGS, **settings)

    def __post_init__(self) -> None:
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {self.batch_size}")
        self._encoder: Encoder | None = None
        self._doc_vectors: np.ndarray | None = None
        self._query_memo: dict[str, np.ndarray] = {}
        self.embedding_cache = EmbeddingCache(self.cache_dir if self.cache_dir is not None
                                              else cache_root() / EMBEDDINGS)

    @property
    def encoder(self) -> Encoder:
        if self._encoder is None:
            self._encoder = load_encoder(self.model, self.max_length, self.tokenizer)
        return self._encoder

    @property
    def doc_vectors(self) -> np.ndarray:
        """The (documents x dim) unit vectors, rows following ``doc_ids`` (sorted by id)."""
        if self._doc_vectors is None:
            raise NotIndexedError("call index() before ranking")
        return self._doc_vectors

    def index(self, docs: Documents) -> Dense:
        ids = np.asarray(docs.doc_ids, dtype=object)
        order = np.argsort(ids.astype(str), kind="stable")  # the tie rule's axis, as the lexical retrievers use
        self.doc_ids = ids[order]
        texts = [docs.doc_texts[i] for i in order]
        encoder = self.encoder
        if not self.cache:
            self._doc_vectors = self._encode_documents(texts)
        else:
            key = EmbeddingCache.key(corpus_digest(self.doc_ids, texts), encoder.fingerprint,
                                     {"model_id": encoder.model_id})
            self._doc_vectors = self.embedding_cache.get_or_compute(key, len(texts),
                                                                    lambda: self._encode_documents(texts))
        self._query_memo = {}
        return self

    def _encode_documents(self, texts: list[str]) -> np.ndarray:
        self.encoded_documents += len(texts)
        return self.encoder.encode(texts, self.batch_size)

    def encode_questions(self, texts: Sequence[str]) -> np.ndarray:
        """Question vectors, each distinct text encoded once per index (fusions and sweeps ask repeatedly)."""
        new = list(dict.fromkeys(t for t in texts if t not in self._query_memo))
        if new:
            for text, vector in zip(new, self.encoder.encode(new, self.batch_size)):
                self._query_memo[text] = vector
        if not texts:
            return np.zeros((0, self.doc_vectors.shape[1]), dtype=np.float32)
        return np.stack([self._query_memo[t] for t in texts])

    def scores(self, texts: Sequence[str]) -> np.ndarray:
        vectors = self.doc_vectors
        return (self.encode_questions(texts) @ vectors.T).astype(np.float64)
