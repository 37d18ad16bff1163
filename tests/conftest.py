"""Fixtures shared by every test package: the embedded help-desk corpus, and SciFact and Cranfield wherever this
machine has them (:mod:`tests.datasets`); without them the tests that need them skip, with one reason line each."""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import tempfile
from collections import Counter
from pathlib import Path

import pytest

from pipeline.common.names import UI_PORT_ENV
from pipeline.data import helpdesk
from tests import datasets

# A suite started in the background (`make test &`, nohup, a CI step) inherits Ctrl-C ignored, and so would every
# command the tests start and stop with SIGINT: they would wait for a Ctrl-C that never comes. Python's own handler
# here makes the commands inherit the default disposition again, as from a terminal.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

REPO = datasets.REPO

# The links tests expect name python -m pipeline.ui's default port: a user's RANKSCOPE_UI_PORT (make ui UI_PORT=N)
# stays out of the suite; tests that need a port set it.
os.environ.pop(UI_PORT_ENV, None)

# The tests' own ir_datasets cache, set before anything imports ir_datasets (it reads the variable once, on import):
# no test reads or writes the user's ~/.ir_datasets, and a subprocess inherits it. The irds_home fixture seeds it.
TEST_IRDS_HOME = Path(tempfile.mkdtemp(prefix="rankscope-ir_datasets-"))
os.environ[datasets.IRDS_HOME_ENV] = str(TEST_IRDS_HOME)
atexit.register(shutil.rmtree, TEST_IRDS_HOME, True)


@pytest.fixture(scope="session")
def helpdesk_collection():
    return helpdesk()


@pytest.fixture(scope="session")
def helpdesk_folder() -> Path:
    """The embedded help-desk corpus's BEIR folder (inside the package)."""
    return REPO / "pipeline" / "data" / "helpdesk"


@pytest.fixture(scope="session")
def scifact_folder(tmp_path_factory) -> Path:
    """BEIR SciFact (5,183 abstracts; qrels test and train) as a BEIR folder."""
    found = datasets.find("scifact", tmp_path_factory.mktemp("scifact"))
    if found is None:
        pytest.skip(datasets.missing("scifact"))
    return found


@pytest.fixture(scope="session")
def cranfield_folder() -> Path:
    """Cranfield 1400 as a BEIR folder (graded 1-4, see tests/datasets.py)."""
    found = datasets.collection_folder("cranfield")
    if found is None:
        pytest.skip(datasets.missing("cranfield"))
    return found


@pytest.fixture(scope="session")
def irds_home(scifact_folder) -> Path:
    """The tests' ``IR_DATASETS_HOME``, seeded with SciFact as ir_datasets downloads it (ir_datasets then reads it
    offline): in this process and in every subprocess a test starts."""
    return datasets.seed_irds_home(TEST_IRDS_HOME, scifact_folder)


@pytest.fixture(scope="session")
def irds_cranfield(cranfield_folder) -> Path:
    """The tests' ``IR_DATASETS_HOME`` seeded with Cranfield as ir_datasets downloads it (``cranfield/cran.tar.gz``,
    made from the BEIR copy with its gains turned back into the original relevance codes)."""
    return datasets.seed_cranfield(TEST_IRDS_HOME, cranfield_folder)


@pytest.fixture(scope="session")
def helpdesk_runs(helpdesk_collection):
    """docs/helpdesk-reference.md's four systems with default settings, each ranking every help-desk question to depth
    100."""
    from retrievers import BM25, LSA, RRF, WeightedSum

    systems = {
        "BM25": BM25(),
        "LSA": LSA(),
        "weighted": WeightedSum([BM25(), LSA()]),
        "RRF": RRF([BM25(), LSA()]),
    }
    c = helpdesk_collection
    return {name: system.index(c).rank(c.query_ids, c.query_texts, 100) for name, system in systems.items()}


def pytest_terminal_summary(terminalreporter) -> None:
    """How many tests skipped, and why: one line per reason (pytest -q prints only the count)."""
    reasons = Counter()
    for report in terminalreporter.stats.get("skipped", []):
        longrepr = report.longrepr
        reasons[longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)] += 1
    for reason, count in reasons.items():
        terminalreporter.write_line(f"skipped {count}: {reason.removeprefix('Skipped: ')}")
