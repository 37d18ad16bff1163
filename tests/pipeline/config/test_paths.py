"""The Hydra configs are found in a checkout and in a plain (non-editable) install alike."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.config.paths import CONF_DIR, REPO_CONF, conf_dir

REPO = Path(__file__).resolve().parents[3]
SOURCES = ["pyproject.toml", "setup.py", "MANIFEST.in", "README.md", "conf", "pipeline", "retrievers", "metrics"]


def test_a_checkout_reads_the_repository_configs():
    assert CONF_DIR == REPO_CONF == REPO / "conf"


def test_without_the_repository_the_packaged_copy_is_used(tmp_path):
    repo, packaged = tmp_path / "repo-conf", tmp_path / "packaged-conf"
    assert conf_dir(repo, packaged) == packaged
    repo.mkdir()
    (repo / "config.yaml").write_text("defaults: []\n")
    assert conf_dir(repo, packaged) == repo


def test_a_build_carries_every_config_inside_the_package(tmp_path):
    """What a wheel is made of: setuptools' build_py with the project's hook, on a copy of the sources."""
    pytest.importorskip("setuptools")
    source = tmp_path / "source"
    source.mkdir()
    for name in SOURCES:
        path = REPO / name
        if path.is_dir():
            shutil.copytree(path, source / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(path, source / name)
    built = tmp_path / "lib"
    subprocess.run([sys.executable, "setup.py", "--quiet", "build_py", "--build-lib", str(built)], cwd=source,
                   check=True, capture_output=True)
    names = {p.relative_to(built).as_posix() for p in built.rglob("*") if p.is_file()}
    expected = {f"pipeline/conf/{p.relative_to(REPO / 'conf').as_posix()}" for p in (REPO / "conf").rglob("*.yaml")}
    assert expected and expected <= names
    assert "pipeline/conf/config.yaml" in names and "pipeline/data/helpdesk/corpus.jsonl" in names
