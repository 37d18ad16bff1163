"""The BM25 systems compared, each run the way its users would: from raw text to the top 100 of each question.

Every system tokenises with the same rules (lower-case, ``[a-z0-9]+`` runs, rankscope's stop words, each
question term once), so all of them see the same tokens and the same BM25 (Lucene idf) should rank the same
documents. A system is a pair of calls, timed separately: ``index(texts)`` and ``search(questions, k)`` ->
(questions x k) corpus positions and scores.
"""

from __future__ import annotations

import argparse
import pickle
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from retrievers.text import Tokenizer

PATTERN = r"[a-z0-9]+"
SLOW_PEER_REPEATS = {"rank_bm25": 1}  # it scans every document per question: one run is enough


def add_common_options(parser: argparse.ArgumentParser) -> None:
    """The DATA and OUT arguments and BM25's settings, shared by the bench's child processes."""
    parser.add_argument("data", type=Path, help="a pickle of {'doc_texts': [...], 'query_texts': [...]}")
    parser.add_argument("out", type=Path, help="where the JSON report goes (arrays beside it as .npz)")
    parser.add_argument("--k1", type=float, default=1.2)
    parser.add_argument("--b", type=float, default=0.75)
    parser.add_argument("--depth", type=int, default=100)


def load_texts(path: Path) -> tuple[list[str], list[str]]:
    with path.open("rb") as handle:
        data = pickle.load(handle)
    return data["doc_texts"], data["query_texts"]


@dataclass
class System:
    name: str
    index: Callable[[list[str]], None]
    search: Callable[[list[str], int], tuple[np.ndarray, np.ndarray]]
    max_steady: int | None = None  # a slow peer answers only this many questions in the steady pass


def rankscope(k1: float, b: float) -> System:
    from retrievers.bm25 import BM25

    state: dict = {}

    class Texts:
        def __init__(self, texts: list[str]) -> None:
            self.doc_texts = texts
            self.doc_ids = [f"{i:09d}" for i in range(len(texts))]  # ids in corpus order: positions map back

    def index(texts: list[str]) -> None:
        state["bm25"] = BM25(k1=k1, b=b).index(Texts(texts))

    def search(questions: list[str], k: int) -> tuple[np.ndarray, np.ndarray]:
        run = state["bm25"].rank([str(i) for i in range(len(questions))], questions, k)
        return run.docs, run.scores

    return System("rankscope", index, search)


def bm25s_system(k1: float, b: float, backend: str) -> System:
    import bm25s

    stopwords = sorted(Tokenizer().stopwords)
    state: dict = {}

    def tokens(texts: list[str], **kwargs):
        return bm25s.tokenize(texts, lower=True, token_pattern=PATTERN, stopwords=stopwords, show_progress=False,
                              **kwargs)

    def index(texts: list[str]) -> None:
        retriever = bm25s.BM25(method="lucene", k1=k1, b=b, backend=backend)
        retriever.index(tokens(texts), show_progress=False)
        state["bm25s"] = retriever

    def search(questions: list[str], k: int) -> tuple[np.ndarray, np.ndarray]:
        retriever = state["bm25s"]
        asked = [list(dict.fromkeys(q)) for q in tokens(questions, return_ids=False)]
        docs, scores = retriever.retrieve(asked, k=k, show_progress=False, n_threads=1)
        scores = np.asarray(scores, dtype=np.float64) * (k1 + 1.0)  # its Lucene variant leaves out (k1 + 1)
        docs = np.asarray(docs, dtype=np.int64)
        docs[scores <= 0] = -1
        return docs, scores

    return System(f"bm25s-{backend}", index, search)


def rank_bm25_system(k1: float, b: float) -> System:
    """rank_bm25's BM25Okapi: pure numpy over every document per question; its idf differs (Robertson)."""
    from rank_bm25 import BM25Okapi

    tokenizer = Tokenizer()
    state: dict = {}

    def index(texts: list[str]) -> None:
        state["okapi"] = BM25Okapi([tokenizer(t) for t in texts], k1=k1, b=b)

    def search(questions: list[str], k: int) -> tuple[np.ndarray, np.ndarray]:
        okapi = state["okapi"]
        docs = np.zeros((len(questions), k), dtype=np.int64)
        scores = np.zeros((len(questions), k))
        for i, q in enumerate(questions):
            s = okapi.get_scores(list(dict.fromkeys(tokenizer(q))))
            top = np.argsort(-s, kind="stable")[:k]
            docs[i, : len(top)], scores[i, : len(top)] = top, s[top]
        return docs, scores

    return System("rank_bm25", index, search, max_steady=1000)


def make(name: str, k1: float, b: float) -> System:
    if name == "rankscope":
        return rankscope(k1, b)
    if name.startswith("bm25s-"):
        return bm25s_system(k1, b, name.removeprefix("bm25s-"))
    if name == "rank_bm25":
        return rank_bm25_system(k1, b)
    raise ValueError(f"unknown system {name!r}")
