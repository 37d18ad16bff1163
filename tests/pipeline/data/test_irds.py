"""Collections by name through the real ir_datasets, offline: its cache seeded with SciFact as ir_datasets downloads
it (the irds_home fixture). The same data through ir_datasets and as a BEIR folder is the same Collection."""

from __future__ import annotations

import hashlib
import io
import json
import random
import subprocess
import sys
import tarfile
from importlib import resources

import pytest

from metrics.errors import InputError
from pipeline.data import Benchmark, IrDatasets, load_beir
from pipeline.data.irds import splits_of, with_split
from tests.pipeline.helpers import cli_env

pytest.importorskip("ir_datasets")


@pytest.fixture(scope="module")
def both(irds_home, scifact_folder):
    """SciFact test through ir_datasets, and from the BEIR folder it was seeded from."""
    return IrDatasets("beir/scifact/test").load(), load_beir(scifact_folder, "test")


def test_scifact_through_ir_datasets_is_the_beir_folder_value_for_value(both):
    irds, folder = both
    assert irds.doc_ids == folder.doc_ids and irds.doc_texts == folder.doc_texts
    assert irds.query_ids == folder.query_ids and irds.query_texts == folder.query_texts
    assert irds.qrels.to_dict() == folder.qrels.to_dict()
    assert (irds.corpus_digest, irds.queries_digest, irds.digest) == (folder.corpus_digest, folder.queries_digest,
                                                                       folder.digest)
    assert irds.summary() == {"documents": 5183, "questions": 300, "judgments": 339, "questions_without_relevant": 0}


def test_the_collection_says_how_it_was_reached(both):
    irds, _ = both
    assert irds.name == "beir/scifact/test" and irds.label == "beir/scifact/test"
    assert irds.origin == {"route": "ir_datasets", "id": "beir/scifact/test", "doc_fields": "title,text",
                           "query_field": "text"}
    assert irds.source == "ir_datasets:beir/scifact/test"


def test_a_split_picks_a_sibling_or_child_id(irds_home, scifact_folder):
    assert with_split("beir/scifact/test", "train") == "beir/scifact/train"
    assert with_split("beir/scifact", "test") == "beir/scifact/test"
    assert with_split("vaswani", "test") == "vaswani"  # a dataset without splits is its own test split
    assert splits_of("beir/scifact/test") == ["test", "train"]
    train = IrDatasets("beir/scifact/test", split="train").load()
    assert train.digest == load_beir(scifact_folder, "train").digest and len(train.query_ids) == 809
    with pytest.raises(InputError, match=r"corpus\.split=dev: beir/scifact/test has no split of that name \(splits: "
                                         r"test, train\)"):
        IrDatasets("beir/scifact/test", split="dev").load()


def test_the_preset_reads_ir_datasets_or_a_local_folder_alike(irds_home, scifact_folder, both):
    through_irds = Benchmark("beir/scifact", "scifact").load()
    from_folder = Benchmark("beir/scifact", "scifact", path=str(scifact_folder)).load()
    assert through_irds.digest == from_folder.digest == both[1].digest
    assert through_irds.name == from_folder.name == "scifact"


def test_fields_are_chosen_by_config(irds_home):
    text_only = IrDatasets("beir/scifact/test", doc_fields=["text"]).load()
    assert text_only.origin["doc_fields"] == "text"
    assert not text_only.doc_texts[0].startswith("Microstructural development")  # the title is left out
    with pytest.raises(InputError, match=r"corpus\.doc_fields: documents of this dataset have no field body "
                                         r"\(fields: text, title\)"):
        IrDatasets("beir/scifact/test", doc_fields=["body"]).load()


def test_an_unknown_id_is_one_line_with_the_closest_ids():
    with pytest.raises(InputError, match=r"corpus\.id=beir/scifactt/test: ir_datasets has no dataset of that id "
                                         r"\(did you mean beir/scifact/test"):
        IrDatasets("beir/scifactt/test").load()


def test_an_id_without_qrels_says_what_it_lacks_and_which_ids_have_all_three():
    with pytest.raises(InputError, match=r"corpus\.id=beir/scifact: the dataset has no qrels in ir_datasets, and "
                                         r"rankscope needs documents, queries and qrels \(these have all three: "
                                         r"beir/scifact/test, beir/scifact/train\)"):
        IrDatasets("beir/scifact").load()


# -- a damaged file in ir_datasets' cache -------------------------------------------------------------------------


def truncated_archive() -> bytes:
    """Half of a tar.gz laid out as cran.tar.gz is (random text, so that half of it is half of the archive)."""
    buffer, rng = io.BytesIO(), random.Random(46)
    with tarfile.open(fileobj=buffer, mode="w:gz") as packed:
        for name in ("cran.all.1400", "cran.qry", "cranqrel"):
            data = "".join(rng.choice("abcdefghij \n") for _ in range(200_000)).encode()
            member = tarfile.TarInfo(name)
            member.size = len(data)
            packed.addfile(member, io.BytesIO(data))
    whole = buffer.getvalue()
    return whole[: len(whole) // 2]


@pytest.mark.parametrize("damage", ["an HTML error page", "a truncated download"])
def test_a_damaged_cached_file_is_one_line_with_its_md5_and_what_to_do(tmp_path, damage):
    """The real ir_datasets, in a subprocess (it fixes its cache folder on import) with a fresh IR_DATASETS_HOME:
    a file at its cache path is taken as downloaded, and reading it failed with an 85-line traceback."""
    home = tmp_path / "irds"
    cached = home / "cranfield" / "cran.tar.gz"
    cached.parent.mkdir(parents=True)
    cached.write_bytes(b"<!DOCTYPE html>\n<html><body>503 Service Unavailable</body></html>\n"
                       if damage == "an HTML error page" else truncated_archive())
    closed = "http://127.0.0.1:9"  # were anything downloaded, it would fail at once
    done = subprocess.run([sys.executable, "-m", "pipeline", "corpus=irds", "corpus.id=cranfield"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300,
                          env={**cli_env(tmp_path), "IR_DATASETS_HOME": str(home), "HTTP_PROXY": closed,
                               "HTTPS_PROXY": closed, "http_proxy": closed, "https_proxy": closed})
    assert done.returncode == 1, done.stderr[-2000:]  # the job failed, on bad input
    (line,) = done.stderr.strip().splitlines()
    published = json.loads(resources.files("ir_datasets").joinpath("etc/downloads.json").read_text())["cranfield"]
    assert line.startswith(f"rankscope: error: corpus.id=cranfield: ir_datasets' cached file {cached} is damaged (")
    assert f"md5 {hashlib.md5(cached.read_bytes()).hexdigest()}; ir_datasets expects md5 " \
           f"{published['main']['expected_md5']}, about {published['main']['size_hint']:,} bytes" in line
    assert ("an HTML page" in line) == (damage == "an HTML error page")
    assert "ReadError" in line and "delete it and run again to download it anew" in line
    assert f"run 'curl -L -o cran.tar.gz {published['main']['url']}'" in line
    assert line.endswith(f"copy cran.tar.gz to {cached})")
