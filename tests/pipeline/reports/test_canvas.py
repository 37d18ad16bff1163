"""The PIL drawing surface: the ticks it picks are matplotlib's, and long counts are shortened to fit."""

from __future__ import annotations

import numpy as np
import pytest
from matplotlib.ticker import MaxNLocator, ScalarFormatter

from pipeline.reports import canvas


@pytest.mark.parametrize("steps", [canvas.LOCATOR_STEPS, canvas.AUTO_STEPS])
@pytest.mark.parametrize("integer", [False, True])
@pytest.mark.parametrize("bins", [3, 6, 9, 10])
def test_ticks_are_the_ones_matplotlib_picks(bins, integer, steps):
    """Against matplotlib's own locator, over views from a fraction of one to beyond a million."""
    highs = [0.3, 1.0, 1.05, 2.1, 7.35, 10.5, 14.7, 31.5, 63.0, 84.0, 105.0, 315.0, 999.0, 1.05e6, 1.25e6,
             *np.random.default_rng(bins).uniform(0.5, 5000, 40).round(2)]
    for high in highs:
        locator = MaxNLocator(nbins=bins, integer=integer, steps=list(steps))
        view = float(high)
        expected = [v for v in locator.tick_values(0.0, view) if v <= view * (1 + 1e-12)]
        assert canvas.nice_ticks(0.0, view, bins, integer, steps) == pytest.approx(expected), (view, bins)


def test_counts_too_long_for_their_tick_are_written_in_thousands_or_millions():
    assert canvas.count_labels([0, 20, 40, 60, 80]) == ["0", "20", "40", "60", "80"]
    assert canvas.count_labels([0, 50_000, 100_000]) == ["0", "50k", "100k"]
    assert canvas.count_labels([0, 400_000, 800_000, 1_200_000]) == ["0", "0.4M", "0.8M", "1.2M"]


@pytest.mark.parametrize("values", [[0.6, 0.9, 1.2, 1.5], [0.3, 0.6, 0.75], [1.0, 10.0, 100.0], [0.25, 0.5, 1.0],
                                    [-0.06, -0.04, -0.02, 0.0, 0.02], [0.0, 200.0, 400.0]])
def test_tick_labels_share_their_decimals_as_matplotlibs_do(values):
    formatter = ScalarFormatter()
    formatter.create_dummy_axis()
    formatter.axis.set_view_interval(min(values), max(values))
    formatter.set_locs(values)
    assert canvas.decimal_labels(values) == [formatter(v) for v in values]
