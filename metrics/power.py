"""How much a question set can tell: the smallest paired difference it detects, the questions a difference needs.

The model is the paired t-test on per-question differences ``d`` (system A minus system B on each question): with
``n`` questions whose differences have standard deviation ``s``, a true mean difference ``delta`` gives the test
statistic a noncentral t distribution with ``n - 1`` degrees of freedom and noncentrality ``delta * sqrt(n) / s``.
Its *power* is the chance that a two-sided test at level ``alpha`` rejects "no difference". The **minimum
detectable effect** (MDE) is the ``delta`` whose power is ``power`` (80% by convention); differences smaller than
it are likely to come out "indistinguishable" even when they are real. By the central limit theorem this also
describes the bootstrap interval and randomisation test rankscope reports, for the few dozen questions up.

Plain functions over arrays and numbers. ``scipy.special`` (the noncentral t) is imported inside the functions that
need it (never ``scipy.stats``, 1-2 s to import); :func:`normal_mde` and :func:`normal_questions` are the
closed-form normal approximations (standard library only), also the exact search's starting point.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

DEFAULT_ALPHA = 0.05
DEFAULT_POWER = 0.8
MAX_QUESTIONS = 10_000_000  # questions_needed gives up (returns None) beyond this


def _check(alpha: float, power: float) -> None:
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be within (0, 1), got {alpha}")
    if not 0.0 < power < 1.0:
        raise ValueError(f"power must be within (0, 1), got {power}")


def difference_sd(differences: np.ndarray) -> float:
    """The sample standard deviation (``ddof=1``) of per-question differences; 0.0 for fewer than two."""
    d = np.asarray(differences, dtype=np.float64).ravel()
    return float(d.std(ddof=1)) if len(d) > 1 else 0.0


def normal_mde(sd: float, n: int, alpha: float = DEFAULT_ALPHA, power: float = DEFAULT_POWER) -> float:
    """``(z[1 - alpha/2] + z[power]) * sd / sqrt(n)``: the MDE when ``sd`` is known (slightly optimistic for small
    ``n``, where the t distribution's heavier tails need a larger difference)."""
    _check(alpha, power)
    z = NormalDist()
    return (z.inv_cdf(1 - alpha / 2) + z.inv_cdf(power)) * sd / math.sqrt(n)


def normal_questions(difference: float, sd: float, alpha: float = DEFAULT_ALPHA,
                     power: float = DEFAULT_POWER) -> float:
    """``((z[1 - alpha/2] + z[power]) * sd / difference) ** 2``: questions needed, normal approximation (a real)."""
    _check(alpha, power)
    z = NormalDist()
    return ((z.inv_cdf(1 - alpha / 2) + z.inv_cdf(power)) * sd / abs(difference)) ** 2


def paired_power(difference: float, sd: float, n: int, alpha: float = DEFAULT_ALPHA) -> float:
    """The chance that a two-sided paired t-test at level ``alpha`` on ``n`` questions rejects "no difference" when
    the true mean difference is ``difference`` and the differences' standard deviation is ``sd``."""
    if n < 2:
        raise ValueError(f"a paired t-test needs at least two questions, got {n}")
    if sd <= 0:
        return 1.0 if difference != 0 else alpha
    # the t quantile and the noncentral t's distribution function, from scipy.special: what scipy.stats' t and nct
    # compute, without scipy.stats' 1-2 s import; imported here, never at module import
    from scipy.special import nctdtr, stdtrit

    df = n - 1
    critical = stdtrit(df, 1 - alpha / 2)
    shift = abs(difference) * math.sqrt(n) / sd
    return float((1.0 - nctdtr(df, shift, critical)) + nctdtr(df, shift, -critical))


def minimum_detectable_effect(sd: float, n: int, alpha: float = DEFAULT_ALPHA,
                              power: float = DEFAULT_POWER) -> float:
    """The mean paired difference a two-sided paired t-test at level ``alpha`` on ``n`` questions detects with
    probability ``power`` (noncentral t, solved numerically); 0.0 when the differences do not vary.

    The noncentrality is ``delta * sqrt(n) / sd``, so the MDE is ``sd`` times the MDE of a unit spread: solved once
    per ``(n, alpha, power)``."""
    _check(alpha, power)
    if n < 2:
        raise ValueError(f"a paired t-test needs at least two questions, got {n}")
    if sd <= 0 or power <= alpha:
        return 0.0
    return sd * _unit_mde(n, alpha, power)


@functools.lru_cache(maxsize=256)
def _unit_mde(n: int, alpha: float, power: float) -> float:
    """The MDE of a unit spread: power grows with the difference, so bisection finds where it reaches ``power``."""
    low, high = 0.0, normal_mde(1.0, n, alpha, power) * 2
    while paired_power(high, 1.0, n, alpha) < power:  # small n: the t's tails can need more than twice the guess
        low, high = high, high * 2
    while high - low > 1e-12 * max(1.0, high):
        middle = (low + high) / 2
        if paired_power(middle, 1.0, n, alpha) < power:
            low = middle
        else:
            high = middle
    return high  # the smallest difference known to reach the power


def questions_needed(difference: float, sd: float, alpha: float = DEFAULT_ALPHA,
                     power: float = DEFAULT_POWER) -> int | None:
    """The fewest questions with which a paired t-test detects a mean difference of ``difference`` with probability
    ``power``, for differences of standard deviation ``sd``; None beyond :data:`MAX_QUESTIONS` (or for 0)."""
    _check(alpha, power)
    if difference == 0:
        return None
    if sd <= 0:
        return 2
    start = normal_questions(difference, sd, alpha, power)
    if start > MAX_QUESTIONS:
        return None
    n = max(2, math.floor(start))
    while n > 2 and paired_power(difference, sd, n - 1, alpha) >= power:  # the normal guess may overshoot
        n -= 1
    while paired_power(difference, sd, n, alpha) < power:  # ... and usually undershoots by a question or two
        n += 1
        if n > MAX_QUESTIONS:
            return None
    return n


@dataclass(frozen=True)
class Sensitivity:
    """What ``n`` questions with these paired differences can tell, at ``alpha`` (two-sided) and ``power``."""

    n: int
    sd: float  # of the per-question differences
    mde: float  # the minimum detectable effect
    alpha: float = DEFAULT_ALPHA
    power: float = DEFAULT_POWER

    def needed(self, difference: float) -> int | None:
        """Questions a mean difference of ``difference`` would need (same spread of differences assumed)."""
        return questions_needed(difference, self.sd, self.alpha, self.power)


def sensitivity(differences: np.ndarray, alpha: float = DEFAULT_ALPHA, power: float = DEFAULT_POWER) -> Sensitivity:
    """The sensitivity of a question set from one pair of systems' per-question differences."""
    d = np.asarray(differences, dtype=np.float64).ravel()
    sd = difference_sd(d)
    mde = minimum_detectable_effect(sd, len(d), alpha, power) if len(d) > 1 else math.nan
    return Sensitivity(len(d), sd, mde, alpha, power)
