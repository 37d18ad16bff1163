"""Stitched pages: the shipped help-desk pages are what ``python -m bench.stitch helpdesk`` makes, and every span marks
the original document's text exactly; SciFact's abstracts stitch the same way (when SciFact is at hand)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.stitch import helpdesk_pages, scifact_pages
from pipeline.data import BeirFolder
from tests import datasets

SHIPPED = Path(__file__).resolve().parents[3] / "pipeline" / "data" / "helpdesk_pages"


def test_the_shipped_pages_are_what_the_stitching_makes_today(tmp_path):
    helpdesk_pages(tmp_path / "pages")
    for name in ("corpus.jsonl", "queries.jsonl", "qrels/test.tsv"):
        assert (tmp_path / "pages" / name).read_bytes() == (SHIPPED / name).read_bytes(), name


def test_each_judgment_becomes_a_span_of_exactly_its_documents_text(tmp_path):
    original = helpdesk_pages(tmp_path / "pages")
    pages = BeirFolder(tmp_path / "pages").load()
    texts = dict(zip(pages.doc_ids, pages.doc_texts))
    by_text = dict(zip(original.doc_texts, original.doc_ids))
    judged = {(q, by_text[texts[d][s:e]], g) for q, d, s, e, g in zip(
        pages.spans.query_ids, pages.spans.doc_ids, pages.spans.starts, pages.spans.ends, pages.spans.grades)}
    assert judged == set(zip(original.qrels.query_ids, original.qrels.doc_ids, original.qrels.grades.tolist()))
    assert all(t.startswith("# ") and "\n## " in t for t in pages.doc_texts)  # Markdown: a heading per topic


def test_scifact_abstracts_stitch_into_pages_with_their_judgments_as_spans(tmp_path):
    folder = datasets.find("scifact", tmp_path / "unpacked")
    if folder is None:
        pytest.skip(datasets.missing("scifact"))
    original = scifact_pages(tmp_path / "pages", 10, folder)
    pages = BeirFolder(tmp_path / "pages").load()
    assert len(pages.doc_ids) == -(-len(original.doc_ids) // 10)
    texts = dict(zip(pages.doc_ids, pages.doc_texts))
    originals = dict(zip(original.doc_ids, original.doc_texts))
    relevant = dict(zip(zip(original.qrels.query_ids, original.qrels.doc_ids), original.qrels.grades))
    for q, d, s, e in zip(pages.spans.query_ids, pages.spans.doc_ids, pages.spans.starts, pages.spans.ends):
        heading = texts[d][: s].rstrip().rsplit("\n", 1)[-1]  # '## <doc id>' right above the abstract
        doc = heading.removeprefix("## ")
        assert texts[d][s:e] == originals[doc] and (q, doc) in relevant
    assert len(pages.spans) == len(original.qrels)
