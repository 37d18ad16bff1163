"""Metrics: (Run, Qrels, metric specs) -> one row per question; plus bootstrap and significance tests.

Knows nothing of retrievers, Hydra or MLflow.
"""

from metrics.bootstrap import Interval, bootstrap_ci, paired_difference
from metrics.evaluate import EvalSettings, Evaluation, evaluate
from metrics.qrels import Qrels
from metrics.run import Run
from metrics.spec import MetricSpec, parse_metric, parse_metrics

__all__ = [
    "EvalSettings", "Evaluation", "Interval", "MetricSpec", "Qrels", "Run", "bootstrap_ci", "evaluate",
    "paired_difference", "parse_metric", "parse_metrics",
]
