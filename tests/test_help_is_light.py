"""Every command prints its help without loading the heavy libraries (a help that takes seconds feels broken): the
check is which modules get imported, not a timing, so it holds on any machine."""

from __future__ import annotations

import subprocess
import sys

import pytest

HEAVY = ("mlflow", "hydra", "pandas", "numpy", "scipy", "matplotlib", "sqlalchemy", "sklearn")
COMMANDS = ["metrics", "pipeline", "pipeline.compare", "pipeline.gate", "pipeline.sync", "pipeline.scheduled",
            "pipeline.server", "pipeline.ui", "pipeline.questions"]


def imported_packages(command: str, *args: str, statuses: tuple[int, ...] = (0, 2)) -> set[str]:
    """The top-level packages ``python -m COMMAND ARGS`` imports (read from ``-X importtime``); it must end with one
    of ``statuses``."""
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", command, *args], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode in statuses, done.stderr[-2000:]
    names = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}
    return {name.split(".")[0] for name in names}


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
