"""Child runs as the end-of-sweep summary reads them, made from real rankings: a job's per-question table (with its
diagnosis columns) written as the job writes it and read back as ``pipeline.tracking.readback`` reads it."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd

from metrics.bootstrap import bootstrap_ci
from metrics.evaluation import evaluate
from metrics.run import Run
from metrics.spec import MetricSpec
from pipeline.analysis.diagnosis import DiagnosisSettings, add_columns, diagnose
from pipeline.analysis.summary import SystemRun
from pipeline.data.collection import Collection
from pipeline.job.table import per_question_table

# The params a help-desk job logs (its flattened config), as MLflow returns them: strings.
HELPDESK_PARAMS = {
    "corpus": "helpdesk", "corpus.name": "helpdesk", "corpus.split": "test", "depth": "100", "metrics.k": "[3, 5, 10]",
    "metrics.measures": "[hit_rate, recall, mrr, ndcg]", "metrics.level": "1", "metrics.gain": "linear",
    "metrics.missing": "zero", "metrics.bootstrap.method": "percentile", "metrics.bootstrap.resamples": "1000",
    "metrics.bootstrap.seed": "0", "metrics.bootstrap.confidence": "0.95",
}


def measured(name: str, job: int, run: Run, collection: Collection, specs: list[MetricSpec],
             params: dict[str, str] | None = None, digest: str = "d1", resamples: int = 1000) -> SystemRun:
    """One finished child run of ``run`` on ``collection``: metrics with bounds, the per-question table read back."""
    evaluation = evaluate(run, collection.qrels, specs, query_ids=collection.query_ids)
    table = per_question_table(collection, run, evaluation)
    depth = min(run.depth or 100, 100)
    add_columns(table, diagnose(collection, run, evaluation, settings=DiagnosisSettings(depth=depth)))
    buffer = io.StringIO()
    table.to_csv(buffer, index=False)
    buffer.seek(0)
    read = pd.read_csv(buffer, dtype={"query_id": str}, keep_default_na=False, na_values=[""]).set_index("query_id")
    names = [s.name for s in specs]
    metrics: dict[str, float] = {"system/questions_evaluated": float(len(read)),
                                   "system/documents": len(collection.doc_ids)}
    for spec, iv in zip(specs, bootstrap_ci(evaluation.per_question[names].to_numpy(np.float64), resamples)):
        metrics.update({spec.mlflow_key: iv.mean, f"{spec.mlflow_key}_ci_lower": iv.low,
                        f"{spec.mlflow_key}_ci_upper": iv.high})
    return SystemRun(f"run{job}", name, "FINISHED", job, metrics, corpus_digest=digest, per_question=read,
                     params={**HELPDESK_PARAMS, **(params or {})},
                     tags={"rankscope.code_version": "0.1.0+test", "rankscope.corpus": collection.name,
                           "rankscope.judgments": str(collection.judgments)},
                     started_ms=1_767_225_600_000 + 60_000 * job)
