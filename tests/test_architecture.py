"""The house rules: the import contracts in pyproject.toml hold, and every package says what it may import."""

from __future__ import annotations

import ast
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


def test_the_commands_python_runs_are_those_with_a_main_block():
    """``pipeline.COMMANDS`` decides where a stop during the imports is one line: every command, and only those."""
    import pipeline

    runnable = {"pipeline" if p.stem == "__main__" else f"pipeline.{p.stem}" for p in (REPO / "pipeline").glob("*.py")
                if 'if __name__ == "__main__":' in p.read_text(encoding="utf-8")}
    assert set(pipeline.COMMANDS) == runnable


OUR_ROOTS = ("pipeline", "metrics", "retrievers")
MOST_OF_OURS = 12  # a module that needs more of ours does more than one thing


def our_imports(path: Path) -> set[str]:
    """The distinct modules of ours named in any import statement of ``path``, function bodies included: ``from
    pipeline.x import y`` names ``pipeline.x``; relative imports are resolved against the file's package."""
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    package = parts[:-1]
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            names.add(".".join(base + ([node.module] if node.module else [])))
    return {name for name in names if name.split(".")[0] in OUR_ROOTS}


def test_no_module_imports_more_than_twelve_of_the_projects_modules():
    counts = {str(path.relative_to(REPO)): len(our_imports(path))
              for root in OUR_ROOTS for path in sorted((REPO / root).rglob("*.py"))}
    offenders = {path: n for path, n in sorted(counts.items(), key=lambda item: -item[1]) if n > MOST_OF_OURS}
    assert not offenders, "\n".join(f"{path}: {n} of our modules" for path, n in offenders.items())
