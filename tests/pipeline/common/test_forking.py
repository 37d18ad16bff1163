"""numpy's BLAS on one thread while a forked copy works on the other core, and left as it was otherwise."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.common.forking import one_blas_thread


def blas_threads() -> set[int]:
    threadpoolctl = pytest.importorskip("threadpoolctl")
    return {pool["num_threads"] for pool in threadpoolctl.threadpool_info() if pool["user_api"] == "blas"}


def test_blas_runs_on_one_thread_inside_and_as_before_outside():
    np.ones((2, 2)) @ np.ones((2, 2))  # BLAS loaded
    before = blas_threads()
    with one_blas_thread():
        assert blas_threads() == {1}
    assert blas_threads() == before
    with one_blas_thread(when=False):
        assert blas_threads() == before
