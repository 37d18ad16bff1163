"""The paired randomisation test and Holm's adjustment."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from metrics.significance import holm, pair_p_values, randomisation_p_values, randomisation_test


def exact_sign_flip_p(d: np.ndarray) -> float:
    """Every one of the 2^n sign patterns: the share whose |mean| reaches the observed |mean|."""
    observed = abs(d.mean())
    means = [abs((np.array(signs) * d).mean()) for signs in itertools.product((1, -1), repeat=len(d))]
    return float(np.mean(np.array(means) >= observed - 1e-12))


def test_identical_systems_have_p_one():
    a = np.random.default_rng(0).random(20)
    assert randomisation_test(a, a.copy()) == 1.0


def test_clearly_different_systems_have_a_small_p():
    rng = np.random.default_rng(1)
    b = rng.random(40)
    a = b + 0.2 + rng.normal(scale=0.05, size=40)
    p = randomisation_test(a, b)
    assert p == 1 / 10001  # no permutation reaches the observed difference: the smallest p the test can give
    assert randomisation_test(a, b, permutations=999) == 1 / 1000


def test_the_p_value_is_close_to_the_exact_one_and_symmetric():
    rng = np.random.default_rng(2)
    a, b = rng.random(12), rng.random(12)
    b[:6] += 0.15
    p = randomisation_test(a, b, permutations=20000)
    assert p == pytest.approx(exact_sign_flip_p(a - b), abs=0.01)
    assert randomisation_test(b, a, permutations=20000) == p


def test_the_p_value_is_deterministic_for_a_seed():
    rng = np.random.default_rng(3)
    a, b = rng.random(30), rng.random(30)
    assert randomisation_test(a, b, seed=7) == randomisation_test(a, b, seed=7)
    assert len({randomisation_test(a, b, permutations=500, seed=s) for s in range(5)}) > 1


def test_pairs_of_columns_get_the_p_values_of_their_differences():
    rng = np.random.default_rng(4)
    values = rng.random((60, 5)).round(2)  # ties between flipped and observed means: the tolerance is exercised
    values[:, 3] = values[:, 1]  # two identical systems: p = 1
    values[:5, 4] += 0.3
    first, second = np.array([0, 0, 1, 2, 1, 4]), np.array([1, 2, 3, 3, 4, 0])
    alone = randomisation_p_values(values[:, first] - values[:, second], permutations=3000, seed=5)
    together = pair_p_values(values, first, second, permutations=3000, seed=5, block=4)  # two blocks of pairs
    assert together.tolist() == alone.tolist() and together[2] == 1.0
    assert pair_p_values(values, first, second, permutations=3000, seed=6).tolist() != alone.tolist()  # seeded


def test_the_flips_are_one_seeded_stream_however_they_are_multiplied():
    """The p-values are those of the plain definition: all the flips drawn at once from the seeded generator, each
    flipped mean compared with the observed one (the flips are multiplied in blocks of rows, which must not change
    which flips are drawn, nor any count)."""
    rng = np.random.default_rng(8)
    d = rng.random((50, 4)).round(2) - rng.random((50, 4)).round(2)
    signs = np.random.default_rng(9).integers(0, 2, size=(2500, 50), dtype=np.int8) * 2 - 1
    observed = np.abs(d.mean(axis=0))
    hits = (np.abs(signs @ d) / 50 >= observed - 1e-12 * np.maximum(1.0, observed)).sum(axis=0)
    assert randomisation_p_values(d, permutations=2500, seed=9).tolist() == ((hits + 1) / 2501).tolist()


def test_bad_input_is_refused():
    with pytest.raises(ValueError):
        randomisation_test(np.array([]), np.array([]))


def test_holm_against_a_hand_computed_example():
    # sorted: 0.005*4 = 0.02, 0.01*3 = 0.03, 0.03*2 = 0.06, 0.04*1 = 0.04 -> raised to 0.06 (monotone)
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])


def test_holm_caps_at_one_and_keeps_a_single_p():
    assert holm([0.5, 0.6]) == pytest.approx([1.0, 1.0])
    assert holm([0.2]) == pytest.approx([0.2])
    assert len(holm([])) == 0
