"""Retrievers: index a corpus once, rank every question in one call (see ``retrievers.base``).

May import: ``metrics`` and third-party libraries; never ``pipeline`` (an import contract checks it). The names below
are loaded on first use, so ``import retrievers`` (and ``python -m retrievers.cache --help``) costs nothing.
"""

from __future__ import annotations

import importlib
from typing import Any

_WHERE = {
    "BM25": "retrievers.bm25", "Dense": "retrievers.dense", "LSA": "retrievers.lsa", "RRF": "retrievers.rrf",
    "Rerank": "retrievers.rerank", "Retriever": "retrievers.base", "RunFile": "retrievers.run_file",
    "ScoringRetriever": "retrievers.base", "Tokenizer": "retrievers.text", "WeightedSum": "retrievers.weighted",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'retrievers' has no attribute {name!r}")
    return getattr(importlib.import_module(_WHERE[name]), name)
