"""The summary tables (ranx-style means, every pair, the grid) and their HTML, Markdown and LaTeX forms, from real
rankings of the help-desk corpus."""

from __future__ import annotations

import pytest

from metrics.spec import parse_metrics
from pipeline.analysis.summary import summarize
from pipeline.reports.tables import (
    TIED,
    Cell,
    Table,
    grid_axes,
    grid_table,
    letter,
    means_table,
    pairs_table,
    summary_tables,
    to_html,
    to_latex,
    to_markdown,
)
from retrievers import BM25, LSA, RRF, WeightedSum
from tests.pipeline.measured import measured

SHOW = parse_metrics("hit_rate@3,recall@5,mrr,ndcg@5")


@pytest.fixture(scope="module")
def study(helpdesk_collection, helpdesk_runs):
    c = helpdesk_collection
    systems = [measured(name, job, run, c, SHOW) for job, (name, run) in enumerate(helpdesk_runs.items())]
    return summarize(systems, "parent", SHOW, SHOW[3], resamples=1000, permutations=2000)


@pytest.fixture(scope="module")
def grid(helpdesk_collection):
    """A k1 x b grid on the help-desk corpus, with LSA and two fusions (none identical to BM25) in place of some."""
    c = helpdesk_collection
    engines = {(0.9, 0.4): BM25(k1=0.9, b=0.4), (0.9, 0.75): LSA(), (1.2, 0.4): RRF([BM25(), LSA()]),
               (1.2, 0.75): WeightedSum([BM25(), LSA()], alpha=0.3)}
    systems = [measured(f"k1={k1} b={b}", job, engine.index(c).rank(c.query_ids, c.query_texts, 100), c, SHOW,
                        {"retriever.k1": str(k1), "retriever.b": str(b)})
               for job, ((k1, b), engine) in enumerate(engines.items())]
    return summarize(systems, "parent", SHOW, SHOW[3], resamples=500, permutations=500)


def test_letters_run_past_z():
    assert [letter(i) for i in (0, 1, 25, 26, 27, 701, 702)] == ["a", "b", "z", "aa", "ab", "zz", "aaa"]


def test_each_mean_carries_the_letters_of_the_systems_it_beats_and_the_best_is_bold(study):
    table = means_table(study)
    assert [row[0].text for row in table.rows] == ["a", "b", "c", "d"]
    assert [row[1].text for row in table.rows] == ["BM25", "LSA", "weighted", "RRF"]
    names = dict(zip(study.representatives, "abcd"))
    for j, metric in enumerate(s.name for s in SHOW):
        column = [row[2 + j] for row in table.rows]
        means = [float(study.means.loc[rep, metric]) for rep in study.representatives]
        assert [c.bold for c in column] == [round(m, 3) == round(max(means), 3) for m in means]
        for rep, cell in zip(study.representatives, column):
            beaten = {names[b if a == rep else a] for (a, b, m), row in study.pairs.iterrows()
                      if m == metric and row.significant and rep in (a, b)
                      and (row.difference > 0) == (a == rep)}
            assert set(cell.marks) == beaten
            assert cell.text == f"{study.means.loc[rep, metric]:.3f}"
    rrf_ndcg = table.rows[3][2 + 3]
    assert rrf_ndcg.bold and rrf_ndcg.text == "0.737"  # helpdesk-reference.md: RRF's nDCG@5 is the best of the four


def test_the_pairs_table_is_antisymmetric_and_marks_what_is_significant(study):
    table = pairs_table(study)
    n = len(study.representatives)
    assert len(table.rows) == n and all(len(row) == 2 + n for row in table.rows)
    for i in range(n):
        assert table.rows[i][2 + i].text == ""
        for j in range(n):
            if i != j:
                a, b = table.rows[i][2 + j], table.rows[j][2 + i]
                assert float(a.text) == pytest.approx(-float(b.text), abs=1e-9)
                assert a.bold == b.bold == (a.marks == "*")
    significant = study.pairs.xs("ndcg@5", level="metric")["significant"]
    assert sum(cell.marks == "*" for row in table.rows for cell in row[2:]) == 2 * int(significant.sum())


def test_a_grid_sweep_gets_its_parameter_by_metric_table(grid, study):
    assert grid_axes(grid) == ("retriever.b", "retriever.k1") and grid_axes(study) is None
    table = grid_table(grid)
    assert table.columns == ["retriever.b \\ retriever.k1", "0.9", "1.2"]
    assert [row[0].text for row in table.rows] == ["0.4", "0.75"]
    by_name = {cell.tip: cell for row in table.rows for cell in row[1:]}
    for system in grid.finished:
        assert by_name[system.name].text == f"{grid.means.loc[system.name, 'ndcg@5']:.3f}"
    best = max(by_name.values(), key=lambda c: float(c.text))
    assert best.bold and best.shade == 1.0 and min(c.shade for c in by_name.values()) == 0.0
    tied = {cell.tip for cell in by_name.values() if cell.marks == TIED}
    assert tied == set(grid.tied) - set(grid.top_group)
    assert [t.key for t in summary_tables(grid)] == ["means", "pairs", "grid"]


def test_markdown_and_latex_keep_the_marks_and_escape_names():
    table = Table("means", "Systems & means", ["#", "system", "ndcg@5"],
                  [[Cell("a"), Cell("BM25_k1 50% {x} | y"), Cell("0.737", "[0.5, 0.9]", "bc", bold=True)],
                   [Cell("b"), Cell("LSA"), Cell("0.400")]], caption="Caption: $ and #")
    md = to_markdown(table)
    starred = Table("pairs", "p", ["x"], [[Cell("+0.010", marks="*", bold=True)]], header_columns=0)
    assert "**+0.010^\\***" in to_markdown(starred)  # the mark escaped: not read as emphasis
    assert "| a | BM25_k1 50% {x} \\| y | **0.737^bc** [0.5, 0.9] |" in md and "|:--|:--|--:|" in md
    tex = to_latex(table)
    assert r"BM25\_k1 50\% \{x\} | y & \textbf{0.737}$^{bc}$ \\" in tex
    assert r"\caption{Caption: \$ and \#}" in tex and tex.count(r"\toprule") == 1 and "[0.5, 0.9]" not in tex
    tied = to_latex(Table("grid", "g", ["x", "y"], [[Cell("0.4"), Cell("0.6", marks=TIED)]], header_columns=1))
    assert r"0.6$^{\dagger}$" in tied
    html = to_html(table)
    assert "<strong>0.737<sup>bc</sup></strong>" in html and "BM25_k1 50% {x} | y" in html


def test_html_cells_are_escaped_and_shaded():
    table = Table("grid", "g", ["x", "y"], [[Cell("<b>"), Cell("0.5", tip='"quoted" <tip>', shade=1.0)]],
                  header_columns=1)
    html = to_html(table)
    assert "<th>&lt;b&gt;</th>" in html and 'title="&quot;quoted&quot; &lt;tip&gt;"' in html
    assert 'style="background: #6baed6"' in html
