"""Retrievers: index a corpus once, rank every question in one call (see ``retrievers.base``)."""

from retrievers.base import Retriever, ScoringRetriever
from retrievers.bm25 import BM25
from retrievers.dense import Dense
from retrievers.lsa import LSA
from retrievers.rerank import Rerank
from retrievers.rrf import RRF
from retrievers.run_file import RunFile
from retrievers.text import Tokenizer
from retrievers.weighted import WeightedSum

__all__ = [
    "BM25", "LSA", "RRF", "Dense", "Rerank", "Retriever", "RunFile", "ScoringRetriever", "Tokenizer", "WeightedSum",
]
