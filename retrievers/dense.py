"""Dense retrieval: documents and questions embedded by a sentence-embedding model, ranked by cosine.

A :class:`ScoringRetriever`, so the weighted and RRF fusions take it as a component (BM25 + dense) and
:class:`retrievers.rerank.Rerank` can use it as a second stage. Document embeddings are cached on disk per
(corpus, model, settings) by :mod:`retrievers.embedding_cache`: a sweep encodes a corpus once.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, ExitStack
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from retrievers.base import BuildContext, Documents, NotIndexedError, ScoringRetriever, array_bytes, corpus_digest
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
    progress: Callable[..., AbstractContextManager[Callable[[int], object]]] | None = field(
        default=None, repr=False, compare=False)
    context_fields = ("cache", "cache_dir", "progress")

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
                   cache=context.cache, cache_dir=root / EMBEDDINGS, progress=context.progress, **settings)

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

    def index_bytes(self) -> int:
        return array_bytes(self._doc_vectors)

    def _encode_documents(self, texts: list[str]) -> np.ndarray:
        """The documents' vectors; an encoding that will take long says so once its first batch is timed, with the
        estimate for the whole corpus, and shows its progress (on a terminal)."""
        self.encoded_documents += len(texts)
        with ExitStack() as stack:
            bar = None if self.progress is None else (
                lambda total: stack.enter_context(self.progress(total, f"encoding {len(texts):,} documents", "cell")))
            return self.encoder.encode(texts, self.batch_size, EncodingWatch(len(texts), self.encoder.model_id, bar))

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


SAY_AFTER_S = 20.0  # an encoding estimated to take longer than this is announced
TIMED_S = 2.0  # seconds of batches after the first that the estimate is made from


def duration(seconds: float) -> str:
    """``40 s``, ``3 min``, ``1.5 h``: an estimate, rounded as one."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


class EncodingWatch:
    """Times an encoding as it starts: when the whole corpus will take more than :data:`SAY_AFTER_S`, it says so on
    stderr (once, with the estimate) and goes on; it also moves the job's bar. The first batch is left out of the
    rate (the model's first call pays for its set-up), which is then taken over :data:`TIMED_S` of batches."""

    def __init__(self, documents: int, model: str,
                 bar: Callable[[int], Callable[[int], object]] | None = None) -> None:
        self.documents, self.model, self.bar = documents, model, bar
        self.started = time.perf_counter()
        self.said = False
        self.estimate: float | None = None
        self.tick: Callable[[int], object] | None = None
        self._first: tuple[float, int] | None = None  # when the first batch ended, and the work it held
        self._done = 0

    def __call__(self, done: int, total: int) -> None:
        now = time.perf_counter()
        if self._first is None:
            self._first = (now, done)
            self.tick = None if self.bar is None else self.bar(total)
        elif self.estimate is None and (now - self._first[0] >= TIMED_S or done >= total):
            ended, counted = self._first
            rate = (now - ended) / max(done - counted, 1)
            self.estimate = (ended - self.started) + rate * (total - counted)
            if self.estimate > SAY_AFTER_S and done < total:
                self.said = True
                print(f"dense: encoding {self.documents:,} documents with {self.model} takes about "
                      f"{duration(self.estimate)} on this machine ({duration(now - self.started)} so far); the "
                      f"embeddings are cached, so later runs on this corpus skip it", file=sys.stderr, flush=True)
        if self.tick is not None:
            self.tick(done - self._done)
        self._done = done
