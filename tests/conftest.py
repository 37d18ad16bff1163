"""Fixtures shared by every test package: the embedded help-desk corpus and the shared datasets folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.data import helpdesk

REPO = Path(__file__).resolve().parents[1]
SHARED_DATASETS = REPO.parent / "shared" / "datasets"


@pytest.fixture(scope="session")
def helpdesk_collection():
    return helpdesk()


@pytest.fixture(scope="session")
def shared_datasets() -> Path:
    if not SHARED_DATASETS.is_dir():
        pytest.skip(f"the shared datasets folder is not beside the repository ({SHARED_DATASETS})")
    return SHARED_DATASETS


@pytest.fixture(scope="session")
def helpdesk_runs(helpdesk_collection):
    """SPEC.md's four systems with default settings, each ranking every help-desk question to depth 100."""
    from retrievers import BM25, LSA, RRF, WeightedSum

    systems = {
        "BM25": BM25(),
        "LSA": LSA(),
        "weighted": WeightedSum([BM25(), LSA()]),
        "RRF": RRF([BM25(), LSA()]),
    }
    c = helpdesk_collection
    return {name: system.index(c).rank(c.query_ids, c.query_texts, 100) for name, system in systems.items()}
