"""A sweep sliced by ``metrics.slices`` (experiment=slices_example: constructed, the candidate better overall and
worse on every billing question): the summary's one compact table with the reversal, the parent's slices.csv
recomputed from the two jobs' per_question.csv, the small multiples and the report's section."""

from __future__ import annotations

import pandas as pd
import pytest

from pipeline.common.names import PER_QUESTION_FILE, SLICES_FILE
from tests.pipeline.analysis.test_slices import holm_by_hand
from tests.pipeline.helpers import job_runs


def test_the_summary_has_one_compact_table_by_slice_and_says_the_reversal(slices_example):
    _, done = slices_example
    text = done.stdout[done.stdout.index("== Sweep"):]
    table = text[text.index("By slice: ndcg@5 of each system"):text.index("Every figure by slice")]
    rows = {line.split()[0]: line.split()[1:] for line in table.splitlines()[3:] if not line.startswith(
        ("REVERSAL", "Too small", "note"))}
    assert list(rows) == ["all", "team=billing", "team=data", "question_length=5-7", "question_length=8-10",
                          "question_length=11-13"]
    assert rows["team=billing"][0] == "12" and rows["team=billing"][3].endswith("*")
    assert rows["team=data"][0] == "60" and rows["team=data"][3].startswith("-") and rows["team=data"][3][-1] == "*"
    reversal = [line for line in table.splitlines() if line.startswith("REVERSAL")]
    assert len(reversal) == 1 and reversal[0].startswith("REVERSAL: current is worse than candidate overall on "
                                                         "ndcg@5 (-0.154")
    assert "but better on team=billing: +0.719" in reversal[0] and reversal[0].endswith("12 questions")


def test_the_parent_s_slices_csv_recomputes_from_the_jobs_per_question_tables(slices_example):
    folder, _ = slices_example
    sweep = folder / "multirun" / "example"
    figures = pd.read_csv(sweep / SLICES_FILE, keep_default_na=False, na_values=[""])
    tables = {}
    for run in job_runs(folder):
        out = run.data.tags["rankscope.output_dir"]
        tables[run.data.tags["rankscope.system"]] = pd.read_csv(f"{out}/{PER_QUESTION_FILE}", dtype={"query_id": str},
                                                                keep_default_na=False).set_index("query_id")
    current, candidate = tables["current"], tables["candidate"]
    for field in ("team", "question_length"):
        for label, questions in candidate.groupby(f"slice:{field}").groups.items():
            rows = figures[(figures.slicing == field) & (figures.slice.astype(str) == str(label))
                           & (figures.metric == "ndcg@5")].set_index("system")
            assert rows.loc["candidate", "reference"] == "candidate" and rows.loc["current", "questions"] == len(
                questions)
            for system, table in tables.items():
                assert rows.loc[system, "mean"] == pytest.approx(table.loc[questions, "ndcg@5"].mean(), abs=1e-12)
            d = current.loc[questions, "ndcg@5"] - candidate.loc[questions, "ndcg@5"]
            assert rows.loc["current", "difference"] == pytest.approx(d.mean(), abs=1e-12)
            assert rows.loc["current", "sd"] == pytest.approx(d.std(ddof=1), abs=1e-12)
    for _metric, cells in figures[figures.tested.fillna(False).astype(bool)].groupby("metric"):
        assert cells.p_holm.tolist() == pytest.approx(holm_by_hand(cells.p_value.tolist()))


def test_the_report_draws_one_panel_per_slice_and_has_the_table(slices_example):
    folder, _ = slices_example
    sweep = folder / "multirun" / "example"
    assert (sweep / "plots" / "slices.png").read_bytes().startswith(b"\x89PNG")
    page = (sweep / "report.html").read_text(encoding="utf-8")
    assert "By slice of the questions" in page and "REVERSAL: current is worse than candidate overall" in page
    assert "ndcg@5 by slice of the questions: each system&#x27;s 95% interval" in page or \
           "ndcg@5 by slice of the questions: each system's 95% interval" in page
