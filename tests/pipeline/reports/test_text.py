"""The terminal text warns when a system's judged@10 is below 0.8: too much of its top 10 was never judged, and its
nDCG undercounts."""

from __future__ import annotations

import re

import pandas as pd

from metrics import evaluate
from metrics.spec import parse_metrics
from pipeline.analysis.summary import SystemRun, summarize
from pipeline.common.names import NOT_RELEVANT_METRIC
from pipeline.reports.sweep_page import PageFiles, sweep_page
from pipeline.reports.text import sweep_text
from tests.pipeline.helpers import log_run

SHOW = parse_metrics(["mrr", "judged@10"])


def system(name: str, job: int, run, collection) -> SystemRun:
    evaluation = evaluate(run, collection.qrels, SHOW)
    per_question = evaluation.per_question.assign(first_relevant_rank=evaluation.first_relevant_rank)
    metrics = {spec.mlflow_key: float(per_question[spec.name].mean()) for spec in SHOW}
    return SystemRun(f"run{job}", name, "FINISHED", job, metrics, corpus_digest="same", per_question=per_question)


def test_the_sweep_summary_warns_in_one_line_naming_each_system_whose_judged_at_10_is_below_0_8(
        helpdesk_collection, helpdesk_runs):
    """A sweep's systems share their judgments, so their warnings would repeat each other: one line names them all
    (each job warned under its own table already)."""
    c = helpdesk_collection
    systems = [system(name, job, run, c) for job, (name, run) in enumerate(helpdesk_runs.items())]
    systems[0].metrics["judged_at_10"] = 0.85  # as if BM25's top 10 were judged well enough
    text = sweep_text(summarize(systems, "parent", SHOW, SHOW[0], resamples=50), "help-desk")
    (warning,) = [line for line in text.splitlines() if line.startswith("warning: ")]
    judged = pd.Series({s.name: s.metrics["judged_at_10"] for s in systems})
    thin = judged[["LSA", "weighted", "RRF"]]
    named = ", ".join(f"{name} ({value:.3f})" for name, value in thin.items())
    assert warning.startswith(f"warning: judged@10 is below 0.8 for {named}: at least {1 - thin.max():.0%} of each "
                              f"one's top 10 was never judged")
    assert "BM25" not in warning and "nDCG" in warning
    assert "bpref" in warning  # not known to list only relevant documents: bpref is the advice


def test_one_thinly_judged_system_keeps_its_own_warning(helpdesk_collection, helpdesk_runs):
    c = helpdesk_collection
    systems = [system(name, job, run, c) for job, (name, run) in enumerate(helpdesk_runs.items())]
    for s in systems[1:]:
        s.metrics["judged_at_10"] = 0.85
    text = sweep_text(summarize(systems, "parent", SHOW, SHOW[0], resamples=50), "help-desk")
    (warning,) = [line for line in text.splitlines() if line.startswith("warning: ")]
    assert warning.startswith(f"warning: BM25: judged@10 is {systems[0].metrics['judged_at_10']:.3f} (below 0.8)")


def test_the_sweep_summary_and_report_say_when_the_judgments_list_only_relevant_documents(
        helpdesk_collection, helpdesk_runs):
    """Then bpref cannot help (it needs judged non-relevant documents): the advice is to judge the top documents."""
    c = helpdesk_collection
    systems = [system(name, job, run, c) for job, (name, run) in enumerate(helpdesk_runs.items())]
    for s in systems:
        s.metrics[NOT_RELEVANT_METRIC] = 0
    summary = summarize(systems, "parent", SHOW, SHOW[0], resamples=50)
    (warning,) = [line for line in sweep_text(summary, "help-desk").splitlines() if line.startswith("warning: ")]
    assert warning.startswith("warning: judged@10 is below 0.8 for all 4 systems (")
    assert "judge each system's top documents" in warning and "bpref" not in warning
    html = sweep_page(summary, "help-desk", {}, [], None, {}, PageFiles())
    assert "Incomplete judgments" in html and html.count("judge each system&#x27;s top documents") == 4


def test_a_summary_without_judged_at_10_does_not_warn(helpdesk_collection, helpdesk_runs):
    c = helpdesk_collection
    systems = [system(name, job, run, c) for job, (name, run) in enumerate(helpdesk_runs.items())]
    for s in systems:
        del s.metrics["judged_at_10"]
    assert "warning" not in sweep_text(summarize(systems, "parent", SHOW[:1], SHOW[0], resamples=50), "help-desk")


def test_a_job_below_the_floor_warns_under_its_table_and_says_when_only_relevant_documents_are_judged(
        launch_dir, capsys):
    """The help-desk judgments list only relevant documents: every top 10 is mostly unjudged."""
    log_run(launch_dir, "metrics.measures=[mrr,ndcg,judged]", "metrics.k=[10]", "metrics.bootstrap.resamples=20")
    lines = capsys.readouterr().out.splitlines()
    (warning,) = [line for line in lines if line.startswith("warning: ")]
    assert re.match(r"warning: BM25: judged@10 is 0\.\d{3} \(below 0\.8\): \d+% of its top 10 was never judged",
                    warning)
    assert warning.endswith("; these judgments list only relevant documents (judged@10 is the share of the top 10 "
                            "that is relevant): judge each system's top documents to compare systems fairly")
    judged_row = next(i for i, line in enumerate(lines) if line.startswith("judged@10"))
    assert judged_row < lines.index(warning) and lines[lines.index(warning) + 1] == ""  # under the table
