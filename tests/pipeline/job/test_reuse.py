"""A sweep does parameter-independent work once; the ``cache/*`` metrics of each MLflow run say what it reused.

Real commands (``python -m pipeline``), one term-count cache folder shared by every command of the module, the
counters read back from the MLflow store: never timings.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.pipeline.helpers import by_system, counters, runs_with_cache
from tests.retrievers.test_helpdesk_study import EXPECTED

HELPDESK = Path(__file__).resolve().parents[3] / "pipeline" / "data" / "helpdesk"


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("shared-cache")


@pytest.fixture(scope="module")
def four_systems(tmp_path_factory, empty_store, cache_dir):
    """the help-desk reference's four systems in one basic-launcher sweep (all jobs in one process), starting with an
    empty cache."""
    folder = tmp_path_factory.mktemp("four")
    return by_system(runs_with_cache(folder, empty_store, cache_dir, "-m", "retriever=bm25,lsa,weighted,rrf"))


def test_the_first_job_tokenises_and_every_later_job_reuses_the_counts(four_systems):
    bm25, lsa, weighted, rrf = (counters(four_systems[s]) for s in ("BM25", "LSA", "weighted", "RRF"))
    assert bm25["tokenised"] == 1 and bm25["stored"] == 1 and bm25["collections_loaded"] == 1
    for later in (lsa, weighted, rrf):
        assert later["tokenised"] == 0 and later["disk_hits"] == 0 and later["collections_reused"] == 1
    assert lsa["memory_hits"] == 1 and weighted["memory_hits"] == 2  # weighted: its BM25 and its LSA


def test_lsa_dims_share_one_tfidf_and_rrf_reuses_its_components_rankings(four_systems):
    lsa, weighted, rrf = (counters(four_systems[s]) for s in ("LSA", "weighted", "RRF"))
    assert (lsa["tfidf_computed"], weighted["tfidf_computed"], weighted["tfidf_reused"]) == (1, 0, 1)
    # RRF's BM25 and LSA components were ranked (deeper) by the BM25 and LSA jobs: nothing indexed or tokenised
    assert rrf["runs_reused"] == 2 and rrf["runs_ranked"] == 1
    assert rrf["memory_hits"] == 0 and rrf["tfidf_computed"] + rrf["tfidf_reused"] == 0


def test_reused_work_gives_spec_numbers(four_systems):
    for system, (hit, recall, mrr, ndcg) in EXPECTED.items():
        m = four_systems[system].data.metrics
        assert (round(m["hit_rate_at_3"], 2), round(m["recall_at_5"], 2), round(m["mrr"], 2),
                round(m["ndcg_at_5"], 3)) == (hit, recall, mrr, ndcg), system


def test_with_the_cache_disabled_every_job_tokenises_once_and_says_so(tmp_path, empty_store, cache_dir):
    runs = by_system(runs_with_cache(tmp_path, empty_store, cache_dir, "-m", "retriever=bm25,lsa,weighted",
                                     "cache.enabled=false"))
    for system, run in runs.items():  # its retrievers and its diagnosis share the job's one tokenisation
        found = counters(run)
        assert found["tokenised"] == 1 and found["disk_hits"] == 0 and found["stored"] == 0, (system, found)
    assert counters(runs["weighted"])["memory_hits"] == 1  # its LSA counts with the terms its BM25 counted
    assert not list(tmp_path.glob("**/terms-*.npz")), "nothing was written to a cache folder"


def beir_copy(folder: Path, changed: bool) -> Path:
    """The help-desk corpus as a BEIR folder; ``changed`` rewrites one document's text."""
    shutil.copytree(HELPDESK, folder)
    if changed:
        corpus = folder / "corpus.jsonl"
        lines = corpus.read_text(encoding="utf-8").splitlines()
        first = json.loads(lines[0])
        first["text"] += " plus one more sentence"
        corpus.write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n", encoding="utf-8")
    return folder


def test_a_new_process_reads_the_disk_cache_and_a_changed_tokenizer_or_corpus_misses_it(
        four_systems, tmp_path, empty_store, cache_dir):
    same, changed = beir_copy(tmp_path / "same", False), beir_copy(tmp_path / "changed", True)
    runs = runs_with_cache(tmp_path, empty_store, cache_dir, "-m", "corpus=beir", f"corpus.path={same},{changed}",
                           "text.stopwords=default,none")
    seen = {(r.data.params["corpus.path"], r.data.params["text.stopwords"]): counters(r) for r in runs}
    assert len(seen) == 4
    # the same documents and tokenizer as the first sweep, in a new process: read from disk, not tokenised
    assert seen[(str(same), "default")]["disk_hits"] == 1 and seen[(str(same), "default")]["tokenised"] == 0
    for key in [(str(changed), "default"), (str(same), "none"), (str(changed), "none")]:
        assert seen[key]["tokenised"] == 1 and seen[key]["disk_hits"] == 0, key


def test_a_corrupted_cache_file_is_detected_and_rebuilt(four_systems, tmp_path, empty_store, cache_dir):
    files = sorted(cache_dir.glob("terms-*.npz"))
    assert files, "the first sweep stored its term counts"
    for path in files:  # flip bytes inside the stored arrays (the zip stays readable) or cut the file short
        raw = bytearray(path.read_bytes())
        raw[len(raw) // 2] ^= 0xFF
        path.write_bytes(bytes(raw))
    (run,) = runs_with_cache(tmp_path, empty_store, cache_dir, "retriever=bm25")
    found = counters(run)
    assert found["corrupt"] == 1 and found["tokenised"] == 1 and found["disk_hits"] == 0 and found["stored"] == 1
    assert run.data.metrics["ndcg_at_5"] == four_systems["BM25"].data.metrics["ndcg_at_5"]


def test_a_cache_limit_that_is_not_a_size_stops_before_any_work():
    from metrics.errors import InputError
    from pipeline.config.build import check_config
    from tests.pipeline.config.test_config import composed

    check_config(composed("cache.limit=500MiB"))
    with pytest.raises(InputError, match=r"cache.limit: 'lots' is not a size"):
        check_config(composed("cache.limit=lots"))


def test_a_corpus_read_ahead_is_counted_as_loaded_by_the_job_that_uses_it_first(tmp_path):
    """A sweep's driver reads its first job's corpus while the store process creates the parent run: that job still
    counts the load (``collections_loaded``), the next one the reuse; a corpus that cannot be read is left for the
    job to report."""
    from omegaconf import OmegaConf

    from metrics.errors import InputError
    from pipeline.data.sources import BeirFolder
    from pipeline.job.reuse import load_ahead, shared_collection

    folder = beir_copy(tmp_path / "corpus", changed=False)
    source, node = BeirFolder(folder), OmegaConf.create({"path": str(folder)})
    load_ahead(source, node)
    first, how = shared_collection(source, node)
    again, then = shared_collection(source, node)
    assert (how, then) == ("loaded", "reused") and again is first and len(first.doc_ids) == 28
    missing = BeirFolder(tmp_path / "nowhere")
    load_ahead(missing, OmegaConf.create({"path": str(tmp_path / "nowhere")}))  # says nothing
    with pytest.raises(InputError):
        shared_collection(missing, OmegaConf.create({"path": str(tmp_path / "nowhere")}))
