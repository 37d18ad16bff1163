"""A traced application's MLflow traces as rankscope's input: the production retriever's rankings as a run
(``retriever=traces``: :mod:`~pipeline.traces.retriever`), its questions as a question set and the judgments on them
as qrels (the rules: :mod:`~pipeline.traces.sampling`; the set's folder, for ``python -m pipeline.questions``:
:mod:`~pipeline.traces.set_folder`). How one trace is read: :mod:`~pipeline.traces.calls`.

May import: ``pipeline.tracking`` (whose module ``traces`` is the one that talks to MLflow Tracing),
``pipeline.data``, ``pipeline.common``, ``retrievers``, ``metrics``. Never MLflow, Hydra or matplotlib directly.
``import pipeline.traces`` loads nothing heavy: its names are imported on first use.
"""

from __future__ import annotations

import importlib
from typing import Any

_WHERE = {"TracedRetriever": "pipeline.traces.retriever"}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'pipeline.traces' has no attribute {name!r}")
    return getattr(importlib.import_module(_WHERE[name]), name)
