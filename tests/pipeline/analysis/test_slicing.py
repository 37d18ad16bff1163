"""Which slice each question is in: a field's values as they are, a number of many values in terciles (cut as
pandas' qcut cuts them), question_length in word tokens, a missing value a slice of its own, too many text values
refused in one line."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from metrics.errors import InputError
from pipeline.analysis.slicing import (
    MAX_SLICES,
    MISSING,
    QUESTION_LENGTH,
    one_question,
    ordered,
    question_length,
    slicing,
    terciles,
)


def test_a_field_s_values_are_its_slices_and_a_missing_value_is_a_slice_of_its_own_counted():
    found = slicing("team", ["billing", None, "data", " billing ", "", float("nan"), "account"])
    assert found.labels == ["billing", MISSING, "data", "billing", MISSING, MISSING, "account"]
    assert found.order == ["account", "billing", "data", MISSING]  # missing last
    assert found.counts() == {"account": 1, "billing": 2, "data": 1, MISSING: 3}
    assert found.binned is None
    assert one_question(found) == ["account", "data"]


def test_question_length_counts_word_tokens_stop_words_and_digits_included():
    assert question_length("how much does the Pro plan cost?") == 7
    assert question_length("API v2: 100 requests/min") == 5  # API, v2, 100, requests, min
    assert question_length("  ") == 0


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_terciles_cut_where_pandas_qcut_cuts(seed):
    values = np.random.default_rng(seed).integers(1, 30, size=97).astype(float)
    which, spans = terciles(values)
    reference = pd.qcut(values, 3, labels=False, duplicates="drop")
    assert which.tolist() == reference.tolist()
    for k, (low, high) in enumerate(spans):
        assert (low, high) == (values[which == k].min(), values[which == k].max())


def test_question_length_is_always_binned_and_the_binning_is_said():
    lengths = [question_length(t) for t in ["a b c", "a b", "one two three four five", "x", "a b c d e f g h"] * 4]
    found = slicing(QUESTION_LENGTH, lengths, binned_always=True, unit="word tokens")
    bins = pd.qcut(np.array(lengths, dtype=float), 3, labels=False, duplicates="drop")
    assert [found.order.index(label) for label in found.labels] == bins.tolist()
    assert found.order == ["1-2", "3-5", "8"]  # each range from its smallest to its largest member
    assert found.binned.startswith("question_length (5 distinct values) binned into 3 slices by value, at its terciles")
    assert found.binned.endswith("1-2, 3-5, 8 word tokens")


def test_a_number_of_few_values_keeps_them_and_one_of_many_is_binned_into_terciles():
    few = slicing("priority", [3, 1, 2.0, "2", None])
    assert few.labels == ["3", "1", "2", "2", MISSING] and few.order == ["1", "2", "3", MISSING] and not few.binned
    many = slicing("age", [*list(range(MAX_SLICES + 10)), None])
    assert many.binned and "at its terciles" in many.binned
    assert many.order == ["0-9", "10-19", "20-29", MISSING]
    assert many.counts()[MISSING] == 1


def test_text_of_too_many_values_is_refused_in_one_line():
    with pytest.raises(InputError) as refused:
        slicing("ticket", [f"T-{i}" for i in range(MAX_SLICES + 1)])
    message = str(refused.value)
    assert "\n" not in message and "ticket has 21 distinct values among 21 questions" in message
    assert f"at most {MAX_SLICES}" in message and "binned into terciles" in message


def test_slices_read_back_keep_their_order_numbers_before_text_missing_last():
    assert ordered(["9-10", "4-6", MISSING, "10", "-3 to -1", "7"]) == ["-3 to -1", "4-6", "7", "9-10", "10", MISSING]
    assert ordered(["data", "Billing", "account"]) == ["account", "Billing", "data"]
