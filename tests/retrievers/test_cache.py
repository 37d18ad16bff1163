"""Term counts are computed once per (corpus, tokenizer) and shared; a bad cache file is rebuilt, never trusted."""

from __future__ import annotations

import numpy as np
import pytest

from retrievers import BM25, LSA, RRF, Tokenizer, WeightedSum
from retrievers.cache import CachedDocuments, TermCountCache, main, parse_size


def cached(collection, cache):
    return CachedDocuments(collection.doc_ids, collection.doc_texts, collection.corpus_digest, cache)


def test_a_fusion_and_a_sweep_tokenise_the_corpus_once(helpdesk_collection):
    cache = TermCountCache()
    docs = cached(helpdesk_collection, cache)
    WeightedSum([BM25(), LSA()]).index(docs)
    for k1 in (0.6, 0.9, 1.2):
        BM25(k1=k1).index(docs)
    RRF([BM25(b=0.4), LSA(dims=4)]).index(docs)
    assert cache.stats["tokenised"] == 1
    assert cache.stats["memory_hits"] == 6


def test_cached_counts_give_identical_rankings(helpdesk_collection):
    c = helpdesk_collection
    plain = BM25().index(c).rank(c.query_ids, c.query_texts)
    via_cache = BM25().index(cached(c, TermCountCache())).rank(c.query_ids, c.query_texts)
    assert np.array_equal(plain.docs, via_cache.docs) and np.array_equal(plain.scores, via_cache.scores, equal_nan=True)


def test_a_second_process_reads_the_disk_cache(tmp_path, helpdesk_collection):
    first, second = TermCountCache(tmp_path), TermCountCache(tmp_path)
    a = first.get(helpdesk_collection.doc_ids, helpdesk_collection.doc_texts, Tokenizer(), "digest")
    b = second.get(helpdesk_collection.doc_ids, helpdesk_collection.doc_texts, Tokenizer(), "digest")
    assert (first.stats["tokenised"], second.stats["tokenised"], second.stats["disk_hits"]) == (1, 0, 1)
    assert (a.counts != b.counts).nnz == 0 and list(a.vocab) == list(b.vocab) and list(a.doc_ids) == list(b.doc_ids)


@pytest.mark.parametrize("change", ["tokenizer", "corpus"])
def test_a_changed_tokenizer_or_corpus_misses_the_cache(tmp_path, helpdesk_collection, change):
    c = helpdesk_collection
    TermCountCache(tmp_path).get(c.doc_ids, c.doc_texts, Tokenizer(), "digest-a")
    again = TermCountCache(tmp_path)
    if change == "tokenizer":
        again.get(c.doc_ids, c.doc_texts, Tokenizer(stopwords=frozenset()), "digest-a")
    else:
        again.get(c.doc_ids, c.doc_texts, Tokenizer(), "digest-b")
    assert again.stats["tokenised"] == 1 and again.stats["disk_hits"] == 0


@pytest.mark.parametrize("damage", ["truncate", "flip"])
def test_a_corrupted_file_is_detected_and_rebuilt(tmp_path, helpdesk_collection, damage):
    c = helpdesk_collection
    writer = TermCountCache(tmp_path)
    writer.get(c.doc_ids, c.doc_texts, Tokenizer(), "d")
    (path,) = tmp_path.glob("terms-*.npz")
    raw = bytearray(path.read_bytes())
    if damage == "truncate":
        path.write_bytes(raw[: len(raw) // 2])
    else:  # flip one byte inside the stored arrays, leaving the zip structure readable
        raw[200] ^= 0xFF
        path.write_bytes(bytes(raw))
    reader = TermCountCache(tmp_path)
    counts = reader.get(c.doc_ids, c.doc_texts, Tokenizer(), "d")
    assert reader.stats["corrupt"] == 1 and reader.stats["tokenised"] == 1
    assert counts.counts.shape == (28, 177)


def test_size_limit_evicts_oldest_and_clear_empties(tmp_path, helpdesk_collection, capsys):
    c = helpdesk_collection
    cache = TermCountCache(tmp_path, limit_bytes=1)
    cache.get(c.doc_ids, c.doc_texts, Tokenizer(), "one")
    assert cache.stats["evicted"] == 1 and not list(tmp_path.glob("terms-*.npz"))
    TermCountCache(tmp_path).get(c.doc_ids, c.doc_texts, Tokenizer(), "two")
    assert main(["clear", "--dir", str(tmp_path)]) == 0
    assert "removed 1 file(s)" in capsys.readouterr().out


def test_a_process_keeps_only_the_most_recent_corpora_in_memory(helpdesk_collection):
    c = helpdesk_collection
    cache = TermCountCache(memory_entries=1)
    for digest in ("first", "second", "first"):
        cache.get(c.doc_ids, c.doc_texts, Tokenizer(), digest)
    assert cache.stats["tokenised"] == 3 and cache.stats["memory_hits"] == 0


def test_a_change_to_the_tokenising_code_changes_every_key(monkeypatch):
    import retrievers.cache as cache_module

    before = TermCountCache().key("corpus", Tokenizer())
    monkeypatch.setattr(cache_module, "tokenizer_code_digest", lambda: "edited")
    assert TermCountCache().key("corpus", Tokenizer()) != before


@pytest.mark.parametrize(("text", "size"), [("4GiB", 4 * 2**30), ("500 MB", 500 * 2**20), ("1.5G", 3 * 2**29),
                                            ("1024", 1024)])
def test_sizes_read_with_binary_units(text, size):
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["lots", "4 parsecs", "-1GiB", ""])
def test_a_size_that_is_not_one_is_refused(text):
    with pytest.raises(ValueError, match="is not a size"):
        parse_size(text)
