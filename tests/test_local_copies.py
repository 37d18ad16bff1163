"""One way to point at a local copy of a public collection: the variable its preset reads (``RANKSCOPE_SCIFACT``,
``RANKSCOPE_CRANFIELD``) is the one the tests' finder (tests/datasets.py) and the benchmarks (bench/paths.py) read."""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml

from pipeline.common.names import LOCAL_COPY_ENV
from tests import datasets


@pytest.mark.parametrize("name", sorted(LOCAL_COPY_ENV))
def test_each_preset_reads_its_collections_variable(name):
    preset = yaml.safe_load((datasets.REPO / "conf" / "corpus" / f"{name}.yaml").read_text(encoding="utf-8"))
    assert preset["path"] == f"${{oc.env:{LOCAL_COPY_ENV[name]},null}}"


@pytest.mark.parametrize("name", sorted(LOCAL_COPY_ENV))
def test_the_tests_find_a_collection_where_its_variable_points_first(name, tmp_path, monkeypatch):
    copy = tmp_path / name
    copy.mkdir()
    (copy / "queries.jsonl").write_text('{"_id": "q1", "text": "a question"}\n', encoding="utf-8")
    monkeypatch.setenv(LOCAL_COPY_ENV[name], str(copy))
    assert datasets.collection_folder(name) == copy
    monkeypatch.setenv(LOCAL_COPY_ENV[name], str(tmp_path / "nowhere"))
    assert datasets.collection_folder(name) != tmp_path / "nowhere"
    reason = datasets.missing(name)
    assert reason.startswith(f"{name} not found ({tmp_path / 'nowhere'}, ")
    assert reason.endswith(f"set {LOCAL_COPY_ENV[name]} to a folder holding it in BEIR layout")


def test_the_benchmarks_read_the_same_variable(tmp_path):
    done = subprocess.run([sys.executable, "-c", "from bench.paths import SCIFACT; print(SCIFACT)"],
                          cwd=datasets.REPO, env={"RANKSCOPE_SCIFACT": str(tmp_path), "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True, check=True)
    assert done.stdout.strip() == str(tmp_path)
