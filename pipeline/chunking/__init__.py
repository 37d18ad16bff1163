"""Chunking: documents cut into chunks, each its document id plus character offsets (``text[start:end]``), by the
chunkers ``conf/chunker/*.yaml`` entries build (``chunkers``); the tokenizer that sizes chunks and counts budgets
(``tokens``); a collection's chunks, made once per corpus and settings and kept on disk (``chunked``).

The chunk's identity, rankings of chunks and the metrics on them are ``metrics``' (``metrics.chunks``,
``metrics.context``). May import: ``pipeline.data``, ``pipeline.common``, ``retrievers`` (the shipped tokenizer's
path), ``metrics``, numpy and the ``chunk`` extra's libraries (semantic-text-splitter, tokenizers, NLTK,
markdown-it-py), each imported only when a chunker needs it. Never MLflow, Hydra, OmegaConf or matplotlib.
"""

from __future__ import annotations

import importlib
from typing import Any

_WHERE = {
    "Fixed": "pipeline.chunking.chunkers", "Markdown": "pipeline.chunking.chunkers",
    "Recursive": "pipeline.chunking.chunkers", "Sentences": "pipeline.chunking.chunkers",
    "Whole": "pipeline.chunking.chunkers",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'pipeline.chunking' has no attribute {name!r}")
    return getattr(importlib.import_module(_WHERE[name]), name)
