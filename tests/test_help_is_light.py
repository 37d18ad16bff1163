"""Every command prints its help without loading the heavy libraries (a help that takes seconds feels broken), and a
plain run loads none of the optional ones: the check is which modules get imported, not a timing, so it holds on any
machine (``bench/latency.py`` times them)."""

from __future__ import annotations

import subprocess
import sys

import pytest

HEAVY = ("mlflow", "hydra", "pandas", "numpy", "scipy", "matplotlib", "sqlalchemy", "sklearn")
COMMANDS = ["metrics", "pipeline", "pipeline.compare", "pipeline.gate", "pipeline.sync", "pipeline.scheduled",
            "pipeline.server", "pipeline.ui", "pipeline.questions"]


# What a plain help-desk run (BM25 on the embedded corpus, logged to SQLite) must never import, in any of its
# processes: the optional extras (document chunking, dense retrieval, Label Studio, ir_datasets, tuning, Ray,
# PostgreSQL, tantivy) are imported by the code that uses them, when a config asks for it. matplotlib too: a run's
# plots are drawn with PIL (pipeline.reports.run_plots).
OPTIONAL = ("tokenizers", "semantic_text_splitter", "nltk", "onnxruntime", "torch", "transformers",
            "sentence_transformers", "huggingface_hub", "faiss", "tantivy", "sklearn", "label_studio",
            "label_studio_sdk", "ir_datasets", "optuna", "ray", "psycopg", "matplotlib")


def imported_lines(command: str, *args: str, statuses: tuple[int, ...] = (0, 2), **run: object) -> list[str]:
    """The modules ``python -m COMMAND ARGS`` imports, one per import, from every process it runs (read from ``-X
    importtime``, which the processes it forks write too); it must end with one of ``statuses``."""
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", command, *args], capture_output=True, text=True,
                          timeout=300, **run)
    assert done.returncode in statuses, done.stderr[-2000:]
    return [line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")]


def imported_packages(command: str, *args: str, statuses: tuple[int, ...] = (0, 2), **run: object) -> set[str]:
    """The top-level packages ``python -m COMMAND ARGS`` imports."""
    return {name.split(".")[0] for name in imported_lines(command, *args, statuses=statuses, **run)}


@pytest.mark.parametrize("command", COMMANDS)
def test_help_loads_none_of_the_heavy_libraries(command):
    assert not imported_packages(command, "--help") & set(HEAVY)


def test_a_usage_error_of_python_m_metrics_is_light_too():
    assert not imported_packages("metrics", "-m", "no_such_measure", "qrels", "run") & set(HEAVY)


def test_python_m_metrics_scores_a_run_with_numpy_alone(tmp_path):
    """Scoring files on the command line reads them and computes with numpy: pandas (half a second to import),
    scipy, MLflow and the rest stay unloaded."""
    (tmp_path / "qrels").write_text("q1 0 a 2\nq1 0 b 0\nq2 0 c 1\n")
    (tmp_path / "run").write_text("q1 Q0 b 1 2.0 sys\nq1 Q0 a 2 1.0 sys\nq2 Q0 c 1 1.5 sys\n")
    loaded = imported_packages("metrics", "-q", "-m", "all_trec", str(tmp_path / "qrels"), str(tmp_path / "run"),
                               statuses=(0,))
    assert not loaded & (set(HEAVY) - {"numpy"})


def test_a_plain_help_desk_run_imports_none_of_the_optional_libraries_and_mlflow_once(tmp_path):
    """The single run's path stays lean: no optional extra, no matplotlib, and MLflow imported once even though the
    run logs from a second process (that process is forked after MLflow's import and shares it; forked before, it
    imported MLflow again, 1.2-1.3 s of CPU that a busy machine paid)."""
    from pipeline.common.forking import second_core
    from tests.pipeline.helpers import cli_env

    lines = imported_lines("pipeline", "quiet=true", statuses=(0,), cwd=tmp_path, env=cli_env(tmp_path))
    loaded = {name.split(".")[0] for name in lines}
    assert "retrievers" in loaded and "sqlalchemy" in loaded, "the run ranked and logged"
    assert sorted(loaded & set(OPTIONAL)) == []
    if second_core():
        assert lines.count("mlflow") == 1, "the store process imported MLflow again"
