"""The house rules: the import contracts in pyproject.toml hold, and every package says what it may import."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = sorted(p.parent for p in (REPO / "pipeline").glob("*/__init__.py"))


def test_the_import_contracts_hold(capsys):
    from importlinter.cli import lint_imports

    status = lint_imports(config_filename=str(REPO / "pyproject.toml"), no_cache=True)
    out = capsys.readouterr().out
    assert status == 0 and " 0 broken" in out, out[-3000:]


@pytest.mark.parametrize("package", [p.name for p in PACKAGES])
def test_every_package_says_what_it_does_and_what_it_may_import(package):
    doc = importlib.import_module(f"pipeline.{package}").__doc__ or ""
    assert "May import" in doc and len(doc.splitlines()) <= 12, doc


def test_the_top_level_holds_only_commands_and_packages():
    modules = sorted(p.stem for p in (REPO / "pipeline").glob("*.py"))
    assert modules == ["__init__", "__main__", "app", "compare", "gate", "judge", "questions", "scheduled", "server",
                       "sync",
                       "ui"]
