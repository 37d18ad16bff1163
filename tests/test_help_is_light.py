"""Every command prints its help without loading the heavy libraries (a help that takes seconds feels broken): the
check is which modules get imported, not a timing, so it holds on any machine."""

from __future__ import annotations

import subprocess
import sys

import pytest

HEAVY = ("mlflow", "hydra", "pandas", "numpy", "scipy", "matplotlib", "sqlalchemy", "sklearn")
COMMANDS = ["metrics", "pipeline", "pipeline.compare", "pipeline.gate", "pipeline.sync", "pipeline.scheduled",
            "pipeline.server", "pipeline.ui"]


def imported_packages(command: str, *args: str) -> set[str]:
    """The top-level packages ``python -m COMMAND ARGS`` imports (read from ``-X importtime``)."""
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", command, *args], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode in (0, 2), done.stderr[-2000:]
    names = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}
    return {name.split(".")[0] for name in names}


@pytest.mark.parametrize("command", COMMANDS)
def test_help_loads_none_of_the_heavy_libraries(command):
    assert not imported_packages(command, "--help") & set(HEAVY)


def test_a_usage_error_of_python_m_metrics_is_light_too():
    assert not imported_packages("metrics", "-m", "no_such_measure", "qrels", "run") & set(HEAVY)
