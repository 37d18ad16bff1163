"""Metrics: (Run, Qrels, metric specs) -> one row per question; plus bootstrap and significance tests.

Knows nothing of retrievers, Hydra or MLflow (an import contract checks it). The names below are loaded on first
use, so ``python -m metrics --help`` does not pay for numpy's and pandas' imports.
"""

from __future__ import annotations

import importlib
from typing import Any

_WHERE = {
    "Difference": "metrics.bootstrap", "EvalSettings": "metrics.scoring", "Evaluation": "metrics.evaluation",
    "Interval": "metrics.bootstrap", "Intervals": "metrics.bootstrap",
    "MetricSpec": "metrics.spec", "Qrels": "metrics.qrels", "Run": "metrics.run", "bootstrap_ci": "metrics.bootstrap",
    "evaluate": "metrics.evaluation", "paired_difference": "metrics.bootstrap", "parse_metric": "metrics.spec",
    "parse_metrics": "metrics.spec",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'metrics' has no attribute {name!r}")
    return getattr(importlib.import_module(_WHERE[name]), name)
