"""How much a question set can tell: the minimum detectable effect and the questions a difference needs, checked
against simulated experiments (the test's decision counted, not the formula re-derived) and the normal limit."""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest
from scipy import stats

from metrics.bootstrap import percentile_bounds, resample_means
from metrics.power import (
    minimum_detectable_effect,
    normal_mde,
    normal_questions,
    paired_power,
    questions_needed,
    sensitivity,
)


def rejection_rate(samples: np.ndarray, alpha: float = 0.05) -> float:
    """Share of simulated question sets (rows) where a two-sided paired t-test rejects "mean difference 0"."""
    n = samples.shape[1]
    t = samples.mean(axis=1) / (samples.std(axis=1, ddof=1) / math.sqrt(n))
    return float((np.abs(t) > stats.t.ppf(1 - alpha / 2, n - 1)).mean())


@pytest.mark.parametrize("n", [8, 30, 300])
def test_a_true_difference_of_the_mde_is_detected_four_times_in_five(n: int):
    sd, trials = 0.3, 20_000
    mde = minimum_detectable_effect(sd, n)
    rng = np.random.default_rng(n)
    rate = rejection_rate(rng.normal(mde, sd, size=(trials, n)))
    assert rate == pytest.approx(0.80, abs=0.015)  # 0.015 is 5 binomial standard errors at 20,000 trials
    assert paired_power(mde, sd, n) == pytest.approx(0.80, abs=1e-6)


def test_with_few_questions_the_normal_formula_promises_too_much():
    sd, n = 0.3, 8
    optimistic = normal_mde(sd, n)
    assert optimistic < minimum_detectable_effect(sd, n)
    rate = rejection_rate(np.random.default_rng(1).normal(optimistic, sd, size=(20_000, n)))
    assert rate < 0.75  # the t-based MDE is what the test really detects


def test_with_many_questions_t_and_normal_agree():
    assert minimum_detectable_effect(0.25, 5000) == pytest.approx(normal_mde(0.25, 5000), rel=1e-3)


def test_questions_needed_is_the_fewest_that_reach_the_power():
    sd, difference = 0.25, 0.03
    n = questions_needed(difference, sd)
    assert paired_power(difference, sd, n) >= 0.8 > paired_power(difference, sd, n - 1)
    assert abs(n - normal_questions(difference, sd)) < 5
    assert questions_needed(difference / 2, sd) > 3.5 * n  # four times the questions for half the difference


def test_the_mde_and_questions_needed_are_inverse():
    sd = 0.2
    for n in (10, 57, 300):
        assert questions_needed(minimum_detectable_effect(sd, n), sd) == n


def test_skewed_bounded_differences_like_real_metrics_follow_the_mde_at_300_questions():
    # nDCG differences are bounded, often 0, with heavy tails: draw them from a discrete law of that shape
    values = np.array([-1.0, -0.5, -0.2, 0.0, 0.2, 0.5, 1.0])
    weights = np.array([0.03, 0.05, 0.08, 0.64, 0.08, 0.07, 0.05])
    mean = float(values @ weights)
    sd = math.sqrt(float((values - mean) ** 2 @ weights))
    n = 300
    mde = minimum_detectable_effect(sd, n)
    # shift the law so that its true mean is the MDE, then count rejections
    rng = np.random.default_rng(7)
    samples = rng.choice(values - mean + mde, p=weights, size=(20_000, n))
    assert rejection_rate(samples) == pytest.approx(0.80, abs=0.02)


def test_the_bootstrap_interval_rankscope_reports_has_the_same_power():
    sd, n, trials = 0.3, 100, 600
    mde = minimum_detectable_effect(sd, n)
    rng = np.random.default_rng(3)
    excluded = 0
    for trial in range(trials):
        d = rng.normal(mde, sd, size=n)
        low, high = percentile_bounds(resample_means(d, 1000, seed=trial))
        excluded += bool(low[0] > 0 or high[0] < 0)
    assert excluded / trials == pytest.approx(0.80, abs=0.06)  # 0.06: 3.7 binomial standard errors


def test_a_question_set_s_sensitivity_comes_from_its_differences():
    d = np.random.default_rng(0).normal(0.01, 0.2, size=120)
    found = sensitivity(d)
    assert (found.n, found.sd) == (120, pytest.approx(d.std(ddof=1)))
    assert found.mde == pytest.approx(minimum_detectable_effect(d.std(ddof=1), 120))
    assert found.needed(found.mde) == 120


def test_identical_systems_have_no_spread_and_no_detectable_size():
    found = sensitivity(np.zeros(50))
    assert (found.sd, found.mde) == (0.0, 0.0)
    assert math.isnan(sensitivity(np.array([0.3])).mde)
    assert questions_needed(0.0, 0.2) is None


def test_bad_levels_are_refused():
    with pytest.raises(ValueError, match="alpha"):
        normal_mde(0.2, 10, alpha=1.5)
    with pytest.raises(ValueError, match="power"):
        minimum_detectable_effect(0.2, 10, power=0.0)
    with pytest.raises(ValueError, match="two questions"):
        paired_power(0.1, 0.2, 1)


def test_the_power_computation_never_imports_scipy_stats():
    code = ("import sys, metrics.power as p; p.minimum_detectable_effect(0.2, 50); p.questions_needed(0.05, 0.2); "
            "print('scipy.stats' in sys.modules or 'scipy.optimize' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
